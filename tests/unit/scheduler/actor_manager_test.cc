// ActorManager: placement, names, node events, restarts, kills, job ends and restore.
#include <gtest/gtest.h>

#include "tests/unit/scheduler/head_harness.h"

namespace orrery::scheduler {
namespace {

using proto::ActorState;
using proto::MsgType;
using testing::HeadHarness;

proto::WorkerEventMsg Event(proto::WorkerEventKind kind, const std::string& actor,
                            int incarnation) {
  proto::WorkerEventMsg e;
  e.kind = int(kind);
  e.actor_id = actor;
  e.incarnation = incarnation;
  e.address = "tcp://worker";
  e.pid = 4242;
  return e;
}

TEST(ActorManagerTest, PlacesOnANodeReservesAndStartsIt) {
  HeadHarness h;
  std::string node = h.AddNode({{"CPU", 4}});
  std::string job = h.AddJob();
  auto req = h.ActorRequest(job, {{"CPU", 1}});
  h.actors.OnCreate(req, 0);
  auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck, "tcp://driver");
  ASSERT_TRUE(ack);
  EXPECT_TRUE(ack->ok);
  auto start = h.outbox->Take<proto::StartActorMsg>(MsgType::kStartActor,
                                                    h.nodes.address(h.nodes.Index(node)));
  ASSERT_TRUE(start);
  EXPECT_EQ(start->spec.actor_id, req.spec.actor_id);
  EXPECT_EQ(h.Available(node, "CPU"), 3);
  EXPECT_EQ(h.actors.Find(req.spec.actor_id)->node, h.nodes.Index(node));
  // A resent request changes nothing.
  h.actors.OnCreate(req, 1);
  EXPECT_EQ(h.Available(node, "CPU"), 3);
  EXPECT_EQ(h.outbox->Count(MsgType::kStartActor), 0u);
}

TEST(ActorManagerTest, RefusesAnExecutableItsJobDidNotRegister) {
  HeadHarness h;
  h.AddNode({{"CPU", 4}});
  auto req = h.ActorRequest(h.AddJob(), {{"CPU", 1}});
  req.spec.argv = {"/bin/other"};
  h.actors.OnCreate(req, 0);
  auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack);
  EXPECT_FALSE(ack->ok);
  EXPECT_EQ(ack->error_kind, proto::ErrorKind::kConfigError);
  EXPECT_EQ(h.actors.size(), 0u);
}

TEST(ActorManagerTest, NamesAreUniqueWhileTheActorLives) {
  HeadHarness h;
  h.AddNode({{"CPU", 4}});
  std::string job = h.AddJob();
  auto first = h.ActorRequest(job, {{"CPU", 1}}, "counter");
  h.actors.OnCreate(first, 0);
  h.outbox->Clear();
  h.actors.OnCreate(h.ActorRequest(job, {{"CPU", 1}}, "counter"), 0);
  auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack);
  EXPECT_FALSE(ack->ok);
  EXPECT_NE(ack->message.find("already exists"), std::string::npos);

  proto::NamedActorMsg q;
  q.name = "counter";
  q.reply_to = "tcp://asker";
  h.actors.OnGetNamed(q);
  auto reply = h.outbox->Take<proto::NamedActorMsg>(MsgType::kGetNamedActorReply, "tcp://asker");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->actor_id, first.spec.actor_id);

  h.actors.OnKill({first.spec.actor_id, true});  // placed: the node is told to kill it
  EXPECT_TRUE(h.outbox->Take<proto::KillWorkerMsg>(MsgType::kKillWorker));
}

TEST(ActorManagerTest, OnlyTheActorsNodeReportsItAliveAndSubscribersHear) {
  HeadHarness h;
  std::string a = h.AddNode({{"CPU", 1}});
  std::string b = h.AddNode({{"CPU", 0}});
  auto req = h.ActorRequest(h.AddJob(), {{"CPU", 1}});
  h.actors.OnCreate(req, 0);
  h.outbox->Clear();
  auto alive = Event(proto::WorkerEventKind::kActorAlive, req.spec.actor_id, 0);
  h.actors.OnWorkerEvent(alive, h.nodes.Index(b), 1);  // not its node
  EXPECT_EQ(h.actors.Find(req.spec.actor_id)->state, ActorState::kPending);
  alive.incarnation = 5;  // a stale incarnation
  h.actors.OnWorkerEvent(alive, h.nodes.Index(a), 1);
  EXPECT_EQ(h.actors.Find(req.spec.actor_id)->state, ActorState::kPending);
  alive.incarnation = 0;
  h.actors.OnWorkerEvent(alive, h.nodes.Index(a), 1);
  EXPECT_EQ(h.actors.Find(req.spec.actor_id)->state, ActorState::kAlive);
  auto update = h.outbox->Take<proto::ActorUpdateMsg>(MsgType::kActorUpdate, "tcp://driver");
  ASSERT_TRUE(update);
  EXPECT_EQ(update->address, "tcp://worker");
  EXPECT_EQ(update->node_id, a);
}

// A borrower's subscribe may overtake the owner's create (they travel on different
// connections): it waits for the creation, and hears "unknown" only after the grace period.
TEST(ActorManagerTest, ASubscriptionBeforeTheCreationWaitsForIt) {
  HeadHarness h;
  std::string node = h.AddNode({{"CPU", 1}});
  auto req = h.ActorRequest(h.AddJob(), {{"CPU", 1}});
  proto::SubscribeActorMsg early;
  early.actor_id = req.spec.actor_id;
  early.reply_to = "tcp://borrower";
  h.actors.OnSubscribe(early, 0);
  h.actors.OnSubscribe(early, 0.5);  // sent again, not having heard: it waits once
  EXPECT_FALSE(h.outbox->Take<proto::ActorUpdateMsg>(MsgType::kActorUpdate, "tcp://borrower"))
      << "an actor about to be created was called dead";
  h.actors.OnCreate(req, 1);
  auto pending = h.outbox->Take<proto::ActorUpdateMsg>(MsgType::kActorUpdate, "tcp://borrower");
  ASSERT_TRUE(pending) << "the early subscriber did not hear of the creation";
  EXPECT_NE(pending->state, int(ActorState::kDead));
  EXPECT_FALSE(h.outbox->Take<proto::ActorUpdateMsg>(MsgType::kActorUpdate, "tcp://borrower"))
      << "a subscription sent twice waited twice";
  h.outbox->Clear();
  h.actors.OnWorkerEvent(Event(proto::WorkerEventKind::kActorAlive, req.spec.actor_id, 0),
                         h.nodes.Index(node), 2);
  auto alive = h.outbox->Take<proto::ActorUpdateMsg>(MsgType::kActorUpdate, "tcp://borrower");
  ASSERT_TRUE(alive) << "the early subscriber is not subscribed";
  EXPECT_EQ(alive->state, int(ActorState::kAlive));

  // One that is never created is answered dead once the grace period is over.
  proto::SubscribeActorMsg never = early;
  never.actor_id = ActorId::Random().Binary();
  h.actors.OnSubscribe(never, 10);
  h.actors.OnSubscribe(never, 10 + ActorManager::kUnknownActorGraceS / 4);  // from its first
  h.actors.Tick(10 + ActorManager::kUnknownActorGraceS / 2);
  EXPECT_FALSE(h.outbox->Take<proto::ActorUpdateMsg>(MsgType::kActorUpdate, "tcp://borrower"));
  h.actors.Tick(10 + ActorManager::kUnknownActorGraceS);
  auto dead = h.outbox->Take<proto::ActorUpdateMsg>(MsgType::kActorUpdate, "tcp://borrower");
  ASSERT_TRUE(dead);
  EXPECT_EQ(dead->state, int(ActorState::kDead));
  EXPECT_NE(dead->death_cause.find("is known to the head"), std::string::npos);
  EXPECT_FALSE(h.outbox->Take<proto::ActorUpdateMsg>(MsgType::kActorUpdate, "tcp://borrower"));
  // A malformed id is answered at once.
  never.actor_id = "short";
  h.actors.OnSubscribe(never, 30);
  EXPECT_TRUE(h.outbox->Take<proto::ActorUpdateMsg>(MsgType::kActorUpdate, "tcp://borrower"));
}

// A kill is sent until acknowledged; what it changed is stored first, so that a head
// restarted before the worker's death knows not to restart the actor.
TEST(ActorManagerTest, AKillIsRecordedThenAcknowledged) {
  HeadHarness h;
  h.AddNode({{"CPU", 1}});
  auto req = h.ActorRequest(h.AddJob(), {{"CPU", 1}});
  req.spec.options.max_restarts = -1;
  h.actors.OnCreate(req, 0);
  h.outbox->Clear();
  proto::KillActorMsg kill;
  kill.actor_id = req.spec.actor_id;
  kill.no_restart = true;
  kill.request_id = 9;
  kill.reply_to = "tcp://driver";
  h.actors.OnKill(kill);
  EXPECT_TRUE(h.outbox->Take<proto::KillWorkerMsg>(MsgType::kKillWorker));
  auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck, "tcp://driver");
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->request_id, 9u);
  auto record = h.Table("actors").at(UniqueId::FromBinary(req.spec.actor_id).Hex());
  EXPECT_NE(record.find("\"kill_requested\":true"), std::string::npos) << record;
  kill.actor_id = ActorId::Random().Binary();  // one the head does not know: acknowledged too
  h.actors.OnKill(kill);
  EXPECT_TRUE(h.outbox->Take<proto::AckMsg>(MsgType::kAck, "tcp://driver"));
}

// A node sends its events again until the head acknowledges them: a late copy of a worker's
// start never revives an actor that has died since.
TEST(ActorManagerTest, ALateReportOfAStartDoesNotReviveADeadActor) {
  HeadHarness h;
  std::string node = h.AddNode({{"CPU", 1}});
  auto req = h.ActorRequest(h.AddJob(), {{"CPU", 1}});
  h.actors.OnCreate(req, 0);
  auto alive = Event(proto::WorkerEventKind::kActorAlive, req.spec.actor_id, 0);
  h.actors.OnWorkerEvent(alive, h.nodes.Index(node), 1);
  size_t updates = h.outbox->Count(MsgType::kActorUpdate);
  h.actors.OnWorkerEvent(alive, h.nodes.Index(node), 1);  // sent twice: no change
  EXPECT_EQ(h.actors.Find(req.spec.actor_id)->state, ActorState::kAlive);
  EXPECT_EQ(h.outbox->Count(MsgType::kActorUpdate), updates) << "a resend told subscribers again";
  auto died = Event(proto::WorkerEventKind::kActorDied, req.spec.actor_id, 0);
  h.actors.OnWorkerEvent(died, h.nodes.Index(node), 2);
  ASSERT_EQ(h.actors.Find(req.spec.actor_id)->state, ActorState::kDead);
  h.outbox->Clear();
  h.actors.OnWorkerEvent(alive, h.nodes.Index(node), 3);
  EXPECT_EQ(h.actors.Find(req.spec.actor_id)->state, ActorState::kDead);
  EXPECT_FALSE(h.outbox->Take<proto::ActorUpdateMsg>(MsgType::kActorUpdate));
}

// A worker reported alive on a node where this head did not place its actor (a restarted
// head that never stored the actor, or placed it elsewhere): the node is told to kill it,
// since nothing would ever stop it or count what it holds.
TEST(ActorManagerTest, AWorkerAliveWhereTheHeadDidNotPlaceItIsKilled) {
  HeadHarness h;
  std::string a = h.AddNode({{"CPU", 1}});
  std::string b = h.AddNode({{"CPU", 1}});
  auto unknown = Event(proto::WorkerEventKind::kActorAlive, ActorId::Random().Binary(), 0);
  h.actors.OnWorkerEvent(unknown, h.nodes.Index(b), 1);
  auto kill =
      h.outbox->Take<proto::KillWorkerMsg>(MsgType::kKillWorker, h.nodes.address(h.nodes.Index(b)));
  ASSERT_TRUE(kill) << "the worker of an actor the head does not know was left running";
  EXPECT_EQ(kill->actor_id, unknown.actor_id);

  auto req = h.ActorRequest(h.AddJob(), {{"CPU", 1}});
  h.actors.OnCreate(req, 0);
  int placed = h.actors.Find(req.spec.actor_id)->node;
  ASSERT_GE(placed, 0);
  int elsewhere = placed == h.nodes.Index(a) ? h.nodes.Index(b) : h.nodes.Index(a);
  h.outbox->Clear();
  auto stray = Event(proto::WorkerEventKind::kActorAlive, req.spec.actor_id, 0);
  h.actors.OnWorkerEvent(stray, elsewhere, 2);
  EXPECT_TRUE(
      h.outbox->Take<proto::KillWorkerMsg>(MsgType::kKillWorker, h.nodes.address(elsewhere)));
  EXPECT_NE(h.actors.Find(req.spec.actor_id)->state, ActorState::kAlive);
  // On its own node, an older incarnation's report is only ignored: the node's worker may
  // be the current one.
  auto old = Event(proto::WorkerEventKind::kActorAlive, req.spec.actor_id, 0);
  old.incarnation = -1;
  h.actors.OnWorkerEvent(old, placed, 3);
  EXPECT_EQ(h.outbox->Count(MsgType::kKillWorker), 0u);
  h.actors.OnWorkerEvent(stray, placed, 4);
  EXPECT_EQ(h.actors.Find(req.spec.actor_id)->state, ActorState::kAlive);
  EXPECT_EQ(h.outbox->Count(MsgType::kKillWorker), 0u);
}

TEST(ActorManagerTest, ANodeDeathRestartsTheActorElsewhereWithinItsBudget) {
  HeadHarness h;
  std::string a = h.AddNode({{"CPU", 1}});
  auto req = h.ActorRequest(h.AddJob(), {{"CPU", 1}});
  req.spec.options.max_restarts = 1;
  h.actors.OnCreate(req, 0);
  std::string b = h.AddNode({{"CPU", 1}});
  int ia = h.nodes.Index(a);
  h.nodes.MarkDead(ia, "test");
  h.actors.NodeDied(ia, "test", 1);
  h.nodes.FreeAll(ia);
  EXPECT_EQ(h.actors.Find(req.spec.actor_id)->state, ActorState::kRestarting);
  h.queue.ScheduleAll(1);
  const ActorEntry* e = h.actors.Find(req.spec.actor_id);
  EXPECT_EQ(e->node, h.nodes.Index(b));
  EXPECT_EQ(e->incarnation, 1);
  EXPECT_EQ(h.Available(b, "CPU"), 0);
  // Its second death is past the budget.
  auto died = Event(proto::WorkerEventKind::kActorDied, req.spec.actor_id, 1);
  died.error_kind = proto::ErrorKind::kOutOfMemoryError;
  h.actors.OnWorkerEvent(died, h.nodes.Index(b), 2);
  EXPECT_EQ(h.actors.Find(req.spec.actor_id)->state, ActorState::kDead);
  EXPECT_EQ(h.actors.Find(req.spec.actor_id)->death_kind, proto::ErrorKind::kOutOfMemoryError);
  EXPECT_EQ(h.Available(b, "CPU"), 1);
}

TEST(ActorManagerTest, AnInfeasibleActorDiesAfterItsTimeout) {
  HeadHarness h;
  h.AddNode({{"CPU", 1}});
  auto req = h.ActorRequest(h.AddJob(), {{"GPU", 1}});
  req.spec.infeasible_timeout_s = 2;
  h.actors.OnCreate(req, 0);
  EXPECT_EQ(h.queue.size(), 1u);
  auto pending = h.Table("pending");
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_NE(pending.begin()->second.find("infeasible"), std::string::npos);
  h.queue.ScheduleAll(3);
  EXPECT_EQ(h.queue.size(), 0u);
  EXPECT_TRUE(h.Table("pending").empty());
  EXPECT_EQ(h.actors.Find(req.spec.actor_id)->death_kind, proto::ErrorKind::kInfeasibleError);
}

TEST(ActorManagerTest, AJobsEndFreesItsNamesAndKillsAllButDetachedActors) {
  HeadHarness h;
  h.AddNode({{"CPU", 1}});
  std::string job = h.AddJob();
  auto placed = h.ActorRequest(job, {{"CPU", 1}}, "placed");
  auto waiting = h.ActorRequest(job, {{"CPU", 1}}, "waiting");
  auto detached = h.ActorRequest(job, {{"CPU", 0.0}}, "detached");
  detached.spec.options.lifetime = kDetachedLifetime;
  for (auto* r : {&placed, &waiting, &detached}) h.actors.OnCreate(*r, 0);
  h.outbox->Clear();
  h.actors.JobEnded(job);
  EXPECT_TRUE(h.outbox->Take<proto::KillWorkerMsg>(MsgType::kKillWorker));
  EXPECT_EQ(h.actors.Find(waiting.spec.actor_id)->state, ActorState::kDead);
  EXPECT_TRUE(h.actors.Find(placed.spec.actor_id)->kill_requested);
  EXPECT_FALSE(h.actors.Find(detached.spec.actor_id)->kill_requested);
  // The name "placed" is free before its worker is reported gone.
  h.actors.OnCreate(h.ActorRequest(h.AddJob(), {{"CPU", 0.0}}, "placed"), 0);
  auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack);
  EXPECT_TRUE(ack->ok) << ack->message;
}

TEST(ActorManagerTest, ARestartedHeadKnowsNamesPlacementsAndHeldResources) {
  auto store = std::make_shared<InMemoryStateStore>();
  std::string node, actor;
  {
    HeadHarness first(store);
    node = first.AddNode({{"CPU", 4}});
    auto req = first.ActorRequest(first.AddJob(), {{"CPU", 3}}, "svc");
    first.actors.OnCreate(req, 0);
    actor = req.spec.actor_id;
  }
  HeadHarness second(store);
  second.Restore(0);
  const ActorEntry* e = second.actors.Find(actor);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->node, second.nodes.Index(node));
  EXPECT_EQ(second.Available(node, "CPU"), 1);  // still held by the placed actor
  EXPECT_EQ(second.queue.size(), 0u);           // placed: not started twice
  proto::NamedActorMsg q;
  q.name = "svc";
  q.reply_to = "tcp://asker";
  second.actors.OnGetNamed(q);
  auto reply = second.outbox->Take<proto::NamedActorMsg>(MsgType::kGetNamedActorReply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->actor_id, actor);
}

}  // namespace
}  // namespace orrery::scheduler
