// The node's dispatcher through the node harness: malformed messages are errors, never a
// crash; the head's refusal of the registration; actors and leases given workers and
// devices, and the devices given back.
#include <gtest/gtest.h>

#include "core/internal/kept_memory.h"
#include "tests/unit/node/node_harness.h"

namespace orrery::node {
namespace {

using proto::MsgType;
using testing::NodeHarness;

TEST(NodeDispatchTest, AMalformedMessageIsAnErrorAndChangesNothing) {
  NodeHarness h;
  for (MsgType type : {MsgType::kStartActor, MsgType::kGrantLease, MsgType::kReleaseLease,
                       MsgType::kKillWorker, MsgType::kWorkerRegister, MsgType::kAssignReply,
                       MsgType::kPing, MsgType::kStartJob, MsgType::kStopJob, MsgType::kListWorkers,
                       MsgType::kWorkerStats, MsgType::kBinaryReply, MsgType::kAck}) {
    Status s = h.Feed(type, std::string("not the message its type says"));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << proto::TypeName(type);
  }
  EXPECT_TRUE(h.outbox.Sent().empty());
  EXPECT_TRUE(h.processes->spawns.empty());
  EXPECT_TRUE(h.node->refusal().ok());
}

// The user's GLIBC_TUNABLES keep each of their settings, and workers still get the huge
// pages and the one arena beside them (docs/objects.md "Speed"); an entrypoint's framework
// gets the user's settings and the huge pages.
TEST(NodeDispatchTest, WorkersGetTheUsersMallocTunablesWithTheNodesOwnBeside) {
  if (!internal::KeepFreedMemoryWanted()) GTEST_SKIP() << "ORRERY_KEEP_FREED_MEMORY=0 here";
  NodeHarness h({{"CPU", 4}}, {{"GLIBC_TUNABLES", "glibc.malloc.tcache_count=0"}});
  EXPECT_EQ(h.zygote_env["GLIBC_TUNABLES"],
            "glibc.malloc.tcache_count=0:glibc.malloc.hugetlb=1:glibc.malloc.arena_max=1");
  EXPECT_EQ(h.zygote_env[internal::kFrameworkTunablesEnv],
            "glibc.malloc.tcache_count=0:glibc.malloc.hugetlb=1");
  NodeHarness own({{"CPU", 4}}, {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=0"}});
  EXPECT_EQ(own.zygote_env["GLIBC_TUNABLES"], "glibc.malloc.hugetlb=0:glibc.malloc.arena_max=1");
  EXPECT_EQ(own.zygote_env[internal::kFrameworkTunablesEnv], "glibc.malloc.hugetlb=0");
}

TEST(NodeDispatchTest, AMessageTheNodeDoesNotHandleIsAnError) {
  NodeHarness h;
  Status s = h.Feed(MsgType::kRegisterJob, proto::JobMsg{});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("does not handle"), std::string::npos) << s.message();
}

TEST(NodeDispatchTest, TheHeadsRefusalIsKeptWithItsReason) {
  NodeHarness h;
  proto::AckMsg ack;
  ack.ok = false;
  ack.message = "the autoscaler removed this node";
  EXPECT_TRUE(h.Feed(MsgType::kAck, ack).ok());  // an answer, not a malformed message
  EXPECT_EQ(h.node->refusal().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(h.node->refusal().message().find("autoscaler removed"), std::string::npos);
}

TEST(NodeDispatchTest, ATpuAmountAProcessCannotHoldFailsTheActorWithoutAProcess) {
  NodeHarness h({{"CPU", 4}, {"TPU", 4}});
  auto actor = NodeHarness::Actor({{"TPU", 3}});
  ASSERT_TRUE(h.Feed(MsgType::kStartActor, actor).ok());
  EXPECT_TRUE(h.processes->spawns.empty());
  auto died = h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead);
  ASSERT_TRUE(died);
  EXPECT_EQ(died->kind, int(proto::WorkerEventKind::kActorDied));
  EXPECT_EQ(died->actor_id, actor.spec.actor_id);
  EXPECT_NE(died->cause.find("cannot take 3 TPU chips"), std::string::npos) << died->cause;
}

TEST(NodeDispatchTest, AnActorGetsAWorkerWithItsDevicesWhichGoBackWhenKilled) {
  NodeHarness h({{"CPU", 4}, {"GPU", 1}});
  auto actor = NodeHarness::Actor({{"GPU", 1}});
  ASSERT_TRUE(h.Feed(MsgType::kStartActor, actor).ok());
  ASSERT_EQ(h.processes->spawns.size(), 1u);
  EXPECT_EQ(h.processes->spawns[0].argv, std::vector<std::string>{"/bin/worker"});
  EXPECT_EQ(h.processes->spawns[0].env.at("CUDA_VISIBLE_DEVICES"), "0");
  std::string worker = h.StartWorker(0, 4242, "tcp://w1");
  auto assign = h.outbox.Take<proto::AssignMsg>(MsgType::kAssign, "tcp://w1");
  ASSERT_TRUE(assign);
  EXPECT_TRUE(assign->is_actor);
  EXPECT_EQ(assign->actor.spec.actor_id, actor.spec.actor_id);
  h.Accept(worker);
  auto alive = h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead);
  ASSERT_TRUE(alive);
  EXPECT_EQ(alive->kind, int(proto::WorkerEventKind::kActorAlive));
  EXPECT_EQ(alive->address, "tcp://w1-calls");
  EXPECT_EQ(alive->pid, 4242);

  // The GPU is taken: a second actor that needs it fails at once.
  ASSERT_TRUE(h.Feed(MsgType::kStartActor, NodeHarness::Actor({{"GPU", 1}})).ok());
  auto refused = h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead);
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->cause.find("free GPU"), std::string::npos) << refused->cause;

  // Killed: its process is killed and its GPU is free again at once.
  ASSERT_TRUE(
      h.Feed(MsgType::kKillWorker, proto::KillWorkerMsg{actor.spec.actor_id, "", "bye"}).ok());
  EXPECT_EQ(h.processes->killed, std::vector<int>{4242});
  ASSERT_TRUE(h.Feed(MsgType::kStartActor, NodeHarness::Actor({{"GPU", 1}})).ok());
  ASSERT_EQ(h.processes->spawns.size(), 2u);
  EXPECT_EQ(h.processes->spawns[1].env.at("CUDA_VISIBLE_DEVICES"), "0");

  // Its exit is reported with the kill's reason.
  h.processes->events().exited(4242, "was killed by signal 9");
  auto died = h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead);
  ASSERT_TRUE(died);
  EXPECT_EQ(died->kind, int(proto::WorkerEventKind::kActorDied));
  EXPECT_EQ(died->cause, "bye");
  // Then that its process is gone: the head ends the leases it asked for.
  auto exited = h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead);
  ASSERT_TRUE(exited);
  EXPECT_EQ(exited->kind, int(proto::WorkerEventKind::kProcessExited));
  EXPECT_EQ(exited->control_address, "tcp://w1");
}

TEST(NodeDispatchTest, AReleasedLeaseLeavesAnIdleWorkerThatTheNextLeaseReuses) {
  NodeHarness h;
  auto first = NodeHarness::Lease({{"CPU", 1}});
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, first).ok());
  ASSERT_EQ(h.processes->spawns.size(), 1u);
  std::string worker = h.StartWorker(0, 5000, "tcp://w1");
  auto assign = h.outbox.Take<proto::AssignMsg>(MsgType::kAssign, "tcp://w1");
  ASSERT_TRUE(assign);
  EXPECT_FALSE(assign->is_actor);
  h.Accept(worker);
  auto granted = h.outbox.Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply, "tcp://driver");
  ASSERT_TRUE(granted);
  EXPECT_TRUE(granted->ok);
  EXPECT_EQ(granted->lease_id, first.request.lease_id);
  EXPECT_EQ(granted->worker_address, "tcp://w1-calls");

  ASSERT_TRUE(h.Feed(MsgType::kReleaseLease, proto::ReleaseLeaseMsg{first.request.lease_id}).ok());
  auto second = NodeHarness::Lease({{"CPU", 1}});
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, second).ok());
  EXPECT_EQ(h.processes->spawns.size(), 1u) << "the idle worker was not reused";
  auto regranted = h.outbox.Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply, "tcp://driver");
  ASSERT_TRUE(regranted);
  EXPECT_EQ(regranted->lease_id, second.request.lease_id);
  EXPECT_EQ(regranted->worker_id, granted->worker_id);
  EXPECT_TRUE(h.processes->killed.empty());
}

// The head sends a grant again when the lease's holder asks again: the node starts no second
// worker for it, and answers again once its worker is ready.
TEST(NodeDispatchTest, AGrantSentAgainStartsNoSecondWorker) {
  NodeHarness h;
  auto lease = NodeHarness::Lease({{"CPU", 1}});
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, lease).ok());
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, lease).ok());  // while its worker starts
  ASSERT_EQ(h.processes->spawns.size(), 1u);
  std::string worker = h.StartWorker(0, 5000, "tcp://w1");
  ASSERT_TRUE(h.outbox.Take<proto::AssignMsg>(MsgType::kAssign, "tcp://w1"));
  EXPECT_FALSE(h.outbox.Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply, "tcp://driver"));
  h.Accept(worker);
  auto granted = h.outbox.Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply, "tcp://driver");
  ASSERT_TRUE(granted);
  EXPECT_FALSE(h.outbox.Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply, "tcp://driver"));
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, lease).ok());  // once it is ready
  auto again = h.outbox.Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply, "tcp://driver");
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->ok);
  EXPECT_EQ(again->worker_id, granted->worker_id);
  EXPECT_EQ(h.processes->spawns.size(), 1u);
}

// A grant that comes again after its lease ended here (released, or its worker died) starts
// no worker: it is answered as failed, to its holder and to the head, which lets it go.
TEST(NodeDispatchTest, AGrantOfALeaseThatEndedHereStartsNoWorker) {
  NodeHarness h;
  auto released = NodeHarness::Lease({{"CPU", 1}});
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, released).ok());
  h.Accept(h.StartWorker(0, 5000, "tcp://w1"));
  ASSERT_TRUE(h.outbox.Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply, "tcp://driver"));
  ASSERT_TRUE(
      h.Feed(MsgType::kReleaseLease, proto::ReleaseLeaseMsg{released.request.lease_id}).ok());
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, released).ok());
  EXPECT_EQ(h.processes->spawns.size(), 1u);
  auto refused = h.outbox.Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply, "tcp://driver");
  ASSERT_TRUE(refused);
  EXPECT_FALSE(refused->ok);
  EXPECT_EQ(refused->error_kind, proto::ErrorKind::kWorkerDied);
  auto event = h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead);
  ASSERT_TRUE(event);
  EXPECT_EQ(event->lease_id, released.request.lease_id);

  auto died = NodeHarness::Lease({{"CPU", 1}});
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, died).ok());  // the idle worker takes it
  h.processes->events().exited(5000, "was killed by signal 9");
  h.outbox.Clear();
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, died).ok());
  EXPECT_EQ(h.processes->spawns.size(), 1u) << "a worker was started for a lease that ended";
  EXPECT_TRUE(h.outbox.Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply, "tcp://driver"));
}

// A start of an actor this node runs already (a restarted head whose placement of it was
// never stored places it again) starts no second worker: a starting one will report itself,
// a running one is reported alive again.
TEST(NodeDispatchTest, AStartOfAnActorRunningHereStartsNoSecondWorker) {
  NodeHarness h;
  auto actor = NodeHarness::Actor({{"CPU", 1}});
  ASSERT_TRUE(h.Feed(MsgType::kStartActor, actor).ok());
  ASSERT_TRUE(h.Feed(MsgType::kStartActor, actor).ok());  // before its worker started
  ASSERT_EQ(h.processes->spawns.size(), 1u);
  h.Accept(h.StartWorker(0, 4242, "tcp://w1"));
  ASSERT_TRUE(h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead));
  ASSERT_TRUE(h.Feed(MsgType::kStartActor, actor).ok());  // once it runs
  EXPECT_EQ(h.processes->spawns.size(), 1u) << "a second worker for one actor";
  auto alive = h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead);
  ASSERT_TRUE(alive);
  EXPECT_EQ(alive->kind, int(proto::WorkerEventKind::kActorAlive));
  EXPECT_EQ(alive->address, "tcp://w1-calls");
  // Its next incarnation (the head restarted it) is another worker.
  actor.incarnation = 1;
  ASSERT_TRUE(h.Feed(MsgType::kStartActor, actor).ok());
  EXPECT_EQ(h.processes->spawns.size(), 2u);
}

TEST(NodeDispatchTest, ALeaseWithDevicesKillsItsWorkerWhenReleased) {
  NodeHarness h({{"CPU", 4}, {"GPU", 2}});
  auto lease = NodeHarness::Lease({{"GPU", 2}});
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, lease).ok());
  ASSERT_EQ(h.processes->spawns.size(), 1u);
  EXPECT_EQ(h.processes->spawns[0].env.at("CUDA_VISIBLE_DEVICES"), "0,1");
  h.Accept(h.StartWorker(0, 6000, "tcp://w1"));
  ASSERT_TRUE(h.Feed(MsgType::kReleaseLease, proto::ReleaseLeaseMsg{lease.request.lease_id}).ok());
  EXPECT_EQ(h.processes->killed, std::vector<int>{6000});
}

TEST(NodeDispatchTest, AnUnknownWorkerIsToldToExit) {
  NodeHarness h;
  proto::WorkerRegisterMsg reg{WorkerId::Random().Hex(), "tcp://stranger", 77, ""};
  ASSERT_TRUE(h.Feed(MsgType::kWorkerRegister, reg).ok());
  EXPECT_TRUE(h.outbox.Take<proto::PingMsg>(MsgType::kExit, "tcp://stranger"));
  EXPECT_TRUE(h.processes->killed.empty());
}

TEST(NodeDispatchTest, APingIsAnswered) {
  NodeHarness h;
  ASSERT_TRUE(h.Feed(MsgType::kPing, proto::PingMsg{5, "tcp://asker"}).ok());
  auto pong = h.outbox.Take<proto::PingMsg>(MsgType::kPong, "tcp://asker");
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong->request_id, 5u);
}

TEST(NodeDispatchTest, AWorkerThatCannotBeStartedFailsItsActorAndGivesItsDevicesBack) {
  NodeHarness h({{"CPU", 4}, {"GPU", 1}});
  h.processes->refuse_spawns = true;
  auto actor = NodeHarness::Actor({{"GPU", 1}});
  ASSERT_TRUE(h.Feed(MsgType::kStartActor, actor).ok());
  auto died = h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead);
  ASSERT_TRUE(died);
  EXPECT_EQ(died->kind, int(proto::WorkerEventKind::kActorDied));
  EXPECT_NE(died->cause.find("could not be started: no zygote"), std::string::npos) << died->cause;
  h.processes->refuse_spawns = false;
  ASSERT_TRUE(h.Feed(MsgType::kStartActor, NodeHarness::Actor({{"GPU", 1}})).ok());
  ASSERT_EQ(h.processes->spawns.size(), 2u);
  EXPECT_EQ(h.processes->spawns[1].env.at("CUDA_VISIBLE_DEVICES"), "0");
}

TEST(NodeDispatchTest, ALeaseWorkersDeathIsAnsweredToTheHolderAndReportedToTheHead) {
  NodeHarness h;
  auto lease = NodeHarness::Lease({{"CPU", 1}});
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, lease).ok());
  h.Accept(h.StartWorker(0, 7000, "tcp://w1"));
  ASSERT_TRUE(h.outbox.Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply, "tcp://driver"));
  h.processes->events().exited(7000, "exited with code 3");
  auto failed = h.outbox.Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply, "tcp://driver");
  ASSERT_TRUE(failed);
  EXPECT_FALSE(failed->ok);
  EXPECT_EQ(failed->error_kind, proto::ErrorKind::kWorkerDied);
  EXPECT_NE(failed->message.find("exited with code 3"), std::string::npos) << failed->message;
  auto event = h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead);
  ASSERT_TRUE(event);
  EXPECT_EQ(event->kind, int(proto::WorkerEventKind::kLeaseWorkerDied));
  EXPECT_EQ(event->lease_id, lease.request.lease_id);
}

// A worker of this node (an actor submitting tasks) held a lease on another: once the holder
// has exited, the leased worker's death goes to the head only, not to an address where
// nothing listens any more.
TEST(NodeDispatchTest, ALeaseWorkersDeathAfterItsHolderExitedIsOnlyReportedToTheHead) {
  NodeHarness h;
  auto actor = NodeHarness::Actor({{"CPU", 1}});
  ASSERT_TRUE(h.Feed(MsgType::kStartActor, actor).ok());
  h.Accept(h.StartWorker(0, 7100, "tcp://holder"));
  auto lease = NodeHarness::Lease({{"CPU", 1}});
  lease.request.reply_to = "tcp://holder";
  ASSERT_TRUE(h.Feed(MsgType::kGrantLease, lease).ok());
  ASSERT_EQ(h.processes->spawns.size(), 2u);
  h.Accept(h.StartWorker(1, 7101, "tcp://leased"));
  ASSERT_TRUE(h.outbox.Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply, "tcp://holder"));

  h.processes->events().exited(7100, "was killed by signal 9");
  h.processes->events().exited(7101, "exited with code 0");
  EXPECT_EQ(h.outbox.Count(MsgType::kLeaseReply), 0u) << "a reply to the exited holder";
  bool reported = false;
  while (auto event =
             h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead)) {
    if (event->kind == int(proto::WorkerEventKind::kLeaseWorkerDied)) {
      EXPECT_EQ(event->lease_id, lease.request.lease_id);
      reported = true;
    }
  }
  EXPECT_TRUE(reported) << "the leased worker's death was not reported to the head";
}

TEST(NodeDispatchTest, AnExecutableHashThatIsNotASha256RunsNothing) {
  NodeHarness h;
  auto actor = NodeHarness::Actor({{"CPU", 1}});
  actor.spec.binary_hash = "not-a-hash";
  actor.spec.argv = {"/bin/sh"};
  ASSERT_TRUE(h.Feed(MsgType::kStartActor, actor).ok());
  EXPECT_TRUE(h.processes->spawns.empty());
  EXPECT_EQ(h.outbox.Count(MsgType::kFetchBinary), 0u);
  auto died = h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead);
  ASSERT_TRUE(died);
  EXPECT_NE(died->cause.find("not a SHA-256"), std::string::npos) << died->cause;
}

TEST(NodeDispatchTest, AnExecutableNotOnTheNodeIsFetchedAndAWorkerWaitsForIt) {
  NodeHarness h;
  auto actor = NodeHarness::Actor({{"CPU", 1}});
  actor.spec.binary_hash = std::string(64, 'a');
  actor.spec.argv = {"/nonexistent/driver"};
  ASSERT_TRUE(h.Feed(MsgType::kStartActor, actor).ok());
  EXPECT_TRUE(h.processes->spawns.empty());
  auto ask = h.outbox.Take<proto::BinaryMsg>(MsgType::kFetchBinary, NodeHarness::kHead);
  ASSERT_TRUE(ask);
  EXPECT_EQ(ask->hash, actor.spec.binary_hash);
  proto::BinaryMsg no = *ask;
  no.ok = false;
  no.message = "no job registered it";
  ASSERT_TRUE(h.Feed(MsgType::kBinaryReply, no).ok());
  auto died = h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead);
  ASSERT_TRUE(died);
  EXPECT_NE(died->cause.find("could not be fetched"), std::string::npos) << died->cause;
  EXPECT_TRUE(h.processes->spawns.empty());
}

}  // namespace
}  // namespace orrery::node
