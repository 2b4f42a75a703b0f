// LeaseManager and PlacementGroupManager: grants, returns, node deaths, bundles, removal,
// waiters and restore.
#include <gtest/gtest.h>

#include "tests/unit/scheduler/head_harness.h"

namespace orrery::scheduler {
namespace {

using proto::MsgType;
using testing::HeadHarness;

proto::PlacementGroupMsg Group(std::vector<Resources> bundles, const std::string& name = "") {
  proto::PlacementGroupMsg m;
  m.request_id = 3;
  m.reply_to = "tcp://driver";
  m.pg_id = PlacementGroupId::Random().Binary();
  m.name = name;
  m.bundles = std::move(bundles);
  m.strategy = int(PlacementStrategy::PACK);
  return m;
}

TEST(LeaseManagerTest, GrantsOnANodeAndReturnsWhatItHeld) {
  HeadHarness h;
  std::string node = h.AddNode({{"CPU", 2}});
  auto req = h.LeaseRequest(h.AddJob(), {{"CPU", 2}});
  h.leases.OnRequest(req, 0);
  auto grant = h.outbox->Take<proto::GrantLeaseMsg>(MsgType::kGrantLease);
  ASSERT_TRUE(grant);
  EXPECT_EQ(h.Available(node, "CPU"), 0);
  EXPECT_EQ(h.Table("leases").size(), 1u);
  h.leases.OnReturn({req.lease_id, false}, 1);
  EXPECT_TRUE(h.outbox->Take<proto::ReleaseLeaseMsg>(MsgType::kReleaseLease));
  EXPECT_EQ(h.Available(node, "CPU"), 2);
  EXPECT_TRUE(h.Table("leases").empty());
}

// A driver that has not heard of its lease asks again (the head may have stopped as the
// request or the grant went): a queued request is not queued twice; a granted one's grant
// goes to its node again; another process naming the lease changes nothing.
TEST(LeaseManagerTest, ARequestSentAgainSendsItsGrantAgain) {
  HeadHarness h;
  std::string node = h.AddNode({{"CPU", 1}});
  std::string job = h.AddJob();
  auto first = h.LeaseRequest(job, {{"CPU", 1}});
  h.leases.OnRequest(first, 0);
  ASSERT_TRUE(h.outbox->Take<proto::GrantLeaseMsg>(MsgType::kGrantLease));
  auto queued = h.LeaseRequest(job, {{"CPU", 1}});
  h.leases.OnRequest(queued, 0);
  h.leases.OnRequest(queued, 1);
  EXPECT_EQ(h.leases.size(), 2u);
  EXPECT_FALSE(h.outbox->Take<proto::GrantLeaseMsg>(MsgType::kGrantLease));

  h.leases.OnRequest(first, 2);
  auto again = h.outbox->Take<proto::GrantLeaseMsg>(MsgType::kGrantLease);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->request.lease_id, first.lease_id);
  EXPECT_EQ(h.Available(node, "CPU"), 0);  // held once
  auto other = first;
  other.reply_to = "tcp://someone-else";
  h.leases.OnRequest(other, 3);
  EXPECT_FALSE(h.outbox->Take<proto::GrantLeaseMsg>(MsgType::kGrantLease));

  h.leases.OnReturn({first.lease_id, false}, 4);  // the queued one is granted now
  ASSERT_TRUE(h.outbox->Take<proto::GrantLeaseMsg>(MsgType::kGrantLease));
  EXPECT_EQ(h.leases.Find(queued.lease_id)->node, h.nodes.Index(node));
}

// Packing resumes where the last demand of the same shape went, until something is given
// back: then the first node below the threshold is found again.
TEST(LeaseManagerTest, PackingGoesBackToAnEarlierNodeOnceItHasRoomAgain) {
  HeadHarness h;
  std::string a = h.AddNode({{"CPU", 4}});
  std::string b = h.AddNode({{"CPU", 4}});
  std::string job = h.AddJob();
  std::vector<proto::LeaseRequestMsg> leases;
  for (int i = 0; i < 3; ++i) {
    leases.push_back(h.LeaseRequest(job, {{"CPU", 1}}));
    h.leases.OnRequest(leases.back(), 0);
  }
  // Two on a (below half full before each), the third on b (a is half full).
  EXPECT_EQ(h.leases.Find(leases[0].lease_id)->node, h.nodes.Index(a));
  EXPECT_EQ(h.leases.Find(leases[1].lease_id)->node, h.nodes.Index(a));
  EXPECT_EQ(h.leases.Find(leases[2].lease_id)->node, h.nodes.Index(b));
  h.leases.OnReturn({leases[0].lease_id, false}, 1);  // a is below half full again
  auto next = h.LeaseRequest(job, {{"CPU", 1}});
  h.leases.OnRequest(next, 1);
  EXPECT_EQ(h.leases.Find(next.lease_id)->node, h.nodes.Index(a));
}

TEST(LeaseManagerTest, ALeaseOnADeadNodeFailsAndOneFromAnotherNodesEventStays) {
  HeadHarness h;
  std::string a = h.AddNode({{"CPU", 1}});
  std::string b = h.AddNode({{"CPU", 0.5}});
  auto req = h.LeaseRequest(h.AddJob(), {{"CPU", 1}});
  h.leases.OnRequest(req, 0);
  proto::WorkerEventMsg e;
  e.kind = int(proto::WorkerEventKind::kLeaseWorkerDied);
  e.lease_id = req.lease_id;
  h.leases.OnWorkerEvent(e, h.nodes.Index(b), 1);  // not the lease's node
  ASSERT_NE(h.leases.Find(req.lease_id), nullptr);
  h.leases.NodeDied(h.nodes.Index(a), "gone");
  auto reply = h.outbox->Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply, "tcp://driver");
  ASSERT_TRUE(reply);
  EXPECT_FALSE(reply->ok);
  EXPECT_EQ(reply->error_kind, proto::ErrorKind::kWorkerDied);
  EXPECT_EQ(h.leases.size(), 0u);
}

// An actor that submitted tasks died before it returned its leases: they end with it, granted
// (resources back, the worker killed) or pending (withdrawn); another requester's stay.
TEST(LeaseManagerTest, TheLeasesOfAProcessThatExitedEnd) {
  HeadHarness h;
  std::string node = h.AddNode({{"CPU", 2}});
  std::string job = h.AddJob();
  auto granted = h.LeaseRequest(job, {{"CPU", 1}});
  granted.reply_to = "tcp://actor";
  auto pending = h.LeaseRequest(job, {{"CPU", 4}});
  pending.reply_to = "tcp://actor";
  auto other = h.LeaseRequest(job, {{"CPU", 1}});
  for (const auto& r : {granted, pending, other}) h.leases.OnRequest(r, 0);
  EXPECT_EQ(h.Available(node, "CPU"), 0);
  h.leases.RequesterGone("tcp://actor", 1);
  auto kill = h.outbox->Take<proto::KillWorkerMsg>(MsgType::kKillWorker);
  ASSERT_TRUE(kill);
  EXPECT_EQ(kill->lease_id, granted.lease_id);
  EXPECT_EQ(h.Available(node, "CPU"), 1);
  EXPECT_EQ(h.leases.Find(granted.lease_id), nullptr);
  EXPECT_EQ(h.leases.Find(pending.lease_id), nullptr);
  EXPECT_NE(h.leases.Find(other.lease_id), nullptr);
  h.leases.RequesterGone("", 2);  // names nobody
  EXPECT_EQ(h.leases.size(), 1u);
}

TEST(LeaseManagerTest, BadRequestsAreRefusedAndInfeasibleOnesTimeOut) {
  HeadHarness h;
  h.AddNode({{"CPU", 1}});
  std::string job = h.AddJob();
  auto bad = h.LeaseRequest(job, {{"CPU", 1}});
  bad.lease_id = "short";
  h.leases.OnRequest(bad, 0);
  auto refused = h.outbox->Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->error_kind, proto::ErrorKind::kConfigError);
  auto big = h.LeaseRequest(job, {{"CPU", 8}});
  big.infeasible_timeout_s = 1;
  h.leases.OnRequest(big, 0);
  EXPECT_EQ(h.leases.size(), 1u);
  h.queue.ScheduleAll(2);
  auto infeasible = h.outbox->Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply);
  ASSERT_TRUE(infeasible);
  EXPECT_EQ(infeasible->error_kind, proto::ErrorKind::kInfeasibleError);
  EXPECT_EQ(h.leases.size(), 0u);
}

TEST(LeaseManagerTest, RestoreKeepsGrantedLeasesOfLiveJobsOnly) {
  auto store = std::make_shared<InMemoryStateStore>();
  std::string node, kept, dropped;
  {
    HeadHarness first(store);
    node = first.AddNode({{"CPU", 4}});
    std::string live = first.AddJob(), gone = first.AddJob();
    auto a = first.LeaseRequest(live, {{"CPU", 1}});
    auto b = first.LeaseRequest(gone, {{"CPU", 1}});
    first.leases.OnRequest(a, 0);
    first.leases.OnRequest(b, 0);
    proto::JobMsg bye;
    bye.job_id = gone;
    bye.alive = false;
    // The goodbye's record is written; the lease record of `gone` is kept by hand, as a head
    // killed between the two writes would leave it.
    std::string lease_record = store->GetAll("leases").value()[Hex(b.lease_id)];
    first.jobs.OnRegister(bye, 1);
    store->Put("leases", Hex(b.lease_id), lease_record);
    kept = a.lease_id;
    dropped = b.lease_id;
  }
  HeadHarness second(store);
  second.Restore(2);
  EXPECT_NE(second.leases.Find(kept), nullptr);
  EXPECT_EQ(second.leases.Find(dropped), nullptr);
  EXPECT_EQ(store->GetAll("leases").value().count(Hex(dropped)), 0u);
  EXPECT_EQ(second.Available(node, "CPU"), 3);
}

TEST(PlacementGroupManagerTest, PlacesBundlesAtomicallyAndLeasesUseThem) {
  HeadHarness h;
  std::string node = h.AddNode({{"CPU", 4}});
  auto pg = Group({{{"CPU", 2}}, {{"CPU", 1}}}, "pair");
  h.pgs.OnCreate(pg, 0);
  auto reply = h.outbox->Take<proto::PlacementGroupReplyMsg>(MsgType::kPlacementGroupReply);
  ASSERT_TRUE(reply);
  EXPECT_TRUE(reply->ready);
  EXPECT_EQ(h.Available(node, "CPU"), 1);
  EXPECT_EQ(h.pgs.CreatedBundles(pg.pg_id), 2);

  auto lease = h.LeaseRequest(h.AddJob(), {{"CPU", 2}});
  lease.placement_group = pg.pg_id;
  h.leases.OnRequest(lease, 0);
  ASSERT_TRUE(h.outbox->Take<proto::GrantLeaseMsg>(MsgType::kGrantLease));
  EXPECT_EQ(h.leases.Find(lease.lease_id)->bundle, 0);
  EXPECT_EQ(h.Available(node, "CPU"), 1);  // taken from the bundle, not the node

  // A second group with the same name is refused while the first lives.
  h.pgs.OnCreate(Group({{{"CPU", 1}}}, "pair"), 0);
  auto dup = h.outbox->Take<proto::PlacementGroupReplyMsg>(MsgType::kPlacementGroupReply);
  ASSERT_TRUE(dup);
  EXPECT_FALSE(dup->ok);
  EXPECT_EQ(dup->error_kind, proto::ErrorKind::kPlacementGroupError);

  // Removal gives back what nobody holds now, and the lease's share when it ends.
  h.pgs.OnRemove(pg, 1);
  EXPECT_EQ(h.Available(node, "CPU"), 2);
  h.leases.OnReturn({lease.lease_id, false}, 2);
  EXPECT_EQ(h.Available(node, "CPU"), 4);
}

// A driver sends a return until the head acknowledges it (a head that stops as it comes
// would keep the lease's resources for the job's life): acknowledged once the lease is
// gone, and again for a resend of one returned already.
TEST(LeaseManagerTest, AReturnIsAcknowledgedOnceTheLeaseIsGone) {
  HeadHarness h;
  std::string node = h.AddNode({{"CPU", 1}});
  auto req = h.LeaseRequest(h.AddJob(), {{"CPU", 1}});
  h.leases.OnRequest(req, 0);
  proto::ReturnLeaseMsg back;
  back.lease_id = req.lease_id;
  back.request_id = 77;
  back.reply_to = "tcp://driver";
  for (int i = 0; i < 2; ++i) {
    h.leases.OnReturn(back, 1 + i);
    auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck, "tcp://driver");
    ASSERT_TRUE(ack) << "return " << i << " was not acknowledged";
    EXPECT_EQ(ack->request_id, 77u);
    EXPECT_TRUE(ack->ok);
    EXPECT_TRUE(h.Table("leases").empty());
    EXPECT_EQ(h.Available(node, "CPU"), 1);
  }
}

// A lease's return, a group's removal and a kill are acknowledged only once stored: a head
// restarted before would restore the lease as held, the group as created, the actor as live.
TEST(LeaseManagerTest, AReturnARemovalAndAKillAreAcknowledgedOnceStored) {
  auto store = std::make_shared<testing::SlowStore>();
  HeadHarness h(store);
  h.AddNode({{"CPU", 2}});
  auto req = h.LeaseRequest(h.AddJob(), {{"CPU", 1}});
  h.leases.OnRequest(req, 0);
  auto pg = Group({{{"CPU", 1}}});
  h.pgs.OnCreate(pg, 0);
  store->Store();
  h.outbox->Clear();
  proto::ReturnLeaseMsg back{req.lease_id, false, 1, "tcp://driver"};
  h.leases.OnReturn(back, 1);
  proto::PlacementGroupMsg remove = pg;
  remove.request_id = 2;
  h.pgs.OnRemove(remove, 1);
  proto::KillActorMsg kill;
  kill.actor_id = ActorId::Random().Binary();
  kill.request_id = 3;
  kill.reply_to = "tcp://driver";
  h.actors.OnKill(kill);
  EXPECT_EQ(h.outbox->Count(MsgType::kAck), 0u) << "acknowledged before it was stored";
  store->Store();
  std::vector<uint64_t> acked;
  while (auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck, "tcp://driver"))
    acked.push_back(ack->request_id);
  EXPECT_EQ(acked, (std::vector<uint64_t>{1, 2, 3}));
}

TEST(PlacementGroupManagerTest, WaitersAreAnsweredOnPlacementOrTimeout) {
  HeadHarness h;
  auto pg = Group({{{"CPU", 2}}});
  h.pgs.OnCreate(pg, 0);
  h.outbox->Clear();
  auto wait = pg;
  wait.timeout_s = 5;
  wait.reply_to = "tcp://waiter";
  h.pgs.OnWait(wait, 0);
  h.pgs.Tick(1);
  EXPECT_EQ(h.outbox->Count(MsgType::kPlacementGroupReply), 0u);
  h.pgs.Tick(6);  // timed out: answered, not ready
  auto late = h.outbox->Take<proto::PlacementGroupReplyMsg>(MsgType::kPlacementGroupReply);
  ASSERT_TRUE(late);
  EXPECT_FALSE(late->ready);
  h.pgs.OnWait(wait, 6);
  h.AddNode({{"CPU", 2}}, {}, "s", 7);  // the queue places it
  auto ready =
      h.outbox->Take<proto::PlacementGroupReplyMsg>(MsgType::kPlacementGroupReply, "tcp://waiter");
  ASSERT_TRUE(ready);
  EXPECT_TRUE(ready->ready);
}

TEST(PlacementGroupManagerTest, RemovingAGroupKillsItsActors) {
  HeadHarness h;
  h.AddNode({{"CPU", 2}});
  auto pg = Group({{{"CPU", 1}}});
  h.pgs.OnCreate(pg, 0);
  auto req = h.ActorRequest(h.AddJob(), {{"CPU", 1}});
  req.spec.options.placement_group = pg.pg_id;
  h.actors.OnCreate(req, 0);
  ASSERT_GE(h.actors.Find(req.spec.actor_id)->node, 0);
  h.outbox->Clear();
  h.pgs.OnRemove(pg, 1);
  auto kill = h.outbox->Take<proto::KillWorkerMsg>(MsgType::kKillWorker);
  ASSERT_TRUE(kill);
  EXPECT_EQ(kill->actor_id, req.spec.actor_id);
  EXPECT_TRUE(h.actors.Find(req.spec.actor_id)->kill_requested);
}

}  // namespace
}  // namespace orrery::scheduler
