// Prestarted workers (node/src/worker_pool.h): spares of an executable in demand are started
// on the tick, taken by actors and leases instead of a fork, never used where devices are
// asked for, and killed once their executable is no longer asked for.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/internal/clock.h"
#include "node/src/worker_pool.h"
#include "tests/unit/node/node_harness.h"

namespace orrery::node {
namespace {

using proto::MsgType;
using testing::FakeWorkerProcesses;
using testing::NodeHarness;
using testing::RecordingOutbox;

struct PoolHarness {
  explicit PoolHarness(int prestarted, Resources resources = {{"CPU", 8}})
      : devices(resources, {}),
        cache(outbox, NodeHarness::kHead, "/nonexistent-node-binaries"),
        processes(ZygoteEvents{}),
        pool(WorkerPoolOptions{NodeHarness::kHead,
                               NodeId::Random().Binary(),
                               "0123456789ab",
                               "s",
                               {"/bin/worker"},
                               "/nonexistent-logs",
                               prestarted},
             outbox, devices, cache, processes) {
    pool.SetNode("tcp://node", nullptr, nullptr);
  }

  // Spawn request i started as pid and registered at address; returns its worker id (hex).
  std::string Start(size_t i, int pid, const std::string& address) {
    const auto& spawn = processes.spawns.at(i);
    pool.OnSpawned(spawn.request_id, pid);
    std::string id = spawn.env.at("ORRERY_WORKER_ID");
    pool.OnWorkerRegister(proto::WorkerRegisterMsg{id, address, pid, address + "-calls"});
    return id;
  }
  void Accept(const std::string& worker_id) {
    proto::AssignReplyMsg reply;
    reply.worker_id = worker_id;
    pool.OnAssignReply(reply);
  }
  // An actor without devices, then a tick: the actor's worker is spawn request 0 (nothing
  // was asked before), the spare that one demand asks for is request 1.
  void ActorThenTick() {
    pool.OnStartActor(NodeHarness::Actor({{"CPU", 1}}));
    pool.Replenish(1.0);
  }
  int Spares() const {
    return int(std::count_if(pool.workers().begin(), pool.workers().end(),
                             [](const auto& w) { return w.second.spare; }));
  }

  RecordingOutbox outbox;
  DeviceAllocator devices;
  ExecutableCache cache;
  FakeWorkerProcesses processes;
  WorkerPool pool;
};

TEST(PrestartedWorkersTest, AnActorTakesASpareInsteadOfForkingAndTheTickStartsItsSuccessor) {
  PoolHarness h(4);
  h.pool.OnStartActor(NodeHarness::Actor({{"CPU", 1}}));
  ASSERT_EQ(h.processes.spawns.size(), 1u) << "the first actor is forked: nothing was asked before";
  h.Accept(h.Start(0, 100, "tcp://w0"));

  h.pool.Replenish(1.0);  // one worker was asked for since the last tick: one spare
  ASSERT_EQ(h.processes.spawns.size(), 2u);
  EXPECT_EQ(h.Spares(), 1);
  std::string spare = h.Start(1, 101, "tcp://w1");
  EXPECT_FALSE(h.outbox.Take<proto::AssignMsg>(MsgType::kAssign, "tcp://w1"))
      << "a spare has no assignment until it is taken";
  auto warm = h.outbox.Take<proto::PingMsg>(MsgType::kPing, "tcp://w1");
  ASSERT_TRUE(warm) << "the node's connection to a spare is not opened ahead";
  EXPECT_TRUE(warm->reply_to.empty());

  auto actor = NodeHarness::Actor({{"CPU", 1}});
  h.pool.OnStartActor(actor);
  EXPECT_EQ(h.processes.spawns.size(), 2u) << "the spare was not taken";
  auto assign = h.outbox.Take<proto::AssignMsg>(MsgType::kAssign, "tcp://w1");
  ASSERT_TRUE(assign);
  EXPECT_TRUE(assign->is_actor);
  EXPECT_EQ(assign->worker_id, spare);
  EXPECT_EQ(assign->actor.spec.actor_id, actor.spec.actor_id);
  h.Accept(spare);
  std::optional<proto::WorkerEventMsg> alive;
  while (auto ev = h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead))
    alive = ev;
  ASSERT_TRUE(alive);
  EXPECT_EQ(alive->kind, int(proto::WorkerEventKind::kActorAlive));
  EXPECT_EQ(alive->actor_id, actor.spec.actor_id);
  EXPECT_EQ(alive->pid, 101);
  EXPECT_EQ(alive->address, "tcp://w1-calls");
  EXPECT_EQ(h.Spares(), 0);

  // Two were asked for within a second: two spares now.
  h.pool.Replenish(2.0);
  EXPECT_EQ(h.processes.spawns.size(), 4u) << "the taken spare was not replaced";
  EXPECT_EQ(h.Spares(), 2);
}

TEST(PrestartedWorkersTest, ASpareTakenBeforeItRegisteredIsAssignedWhenItDoes) {
  PoolHarness h(4);
  h.ActorThenTick();
  ASSERT_EQ(h.processes.spawns.size(), 2u);
  auto actor = NodeHarness::Actor({{"CPU", 1}});
  h.pool.OnStartActor(actor);
  EXPECT_EQ(h.processes.spawns.size(), 2u);
  std::string id = h.Start(1, 201, "tcp://w1");
  auto assign = h.outbox.Take<proto::AssignMsg>(MsgType::kAssign, "tcp://w1");
  ASSERT_TRUE(assign);
  EXPECT_EQ(assign->worker_id, id);
  EXPECT_EQ(assign->actor.spec.actor_id, actor.spec.actor_id);
  EXPECT_FALSE(h.outbox.Take<proto::AssignMsg>(MsgType::kAssign, "tcp://w1")) << "assigned twice";
}

TEST(PrestartedWorkersTest, TheSparesFollowTheLargestBurstUpToTheLimit) {
  PoolHarness h(3);
  for (int i = 0; i < 5; ++i) h.pool.OnStartActor(NodeHarness::Actor({{"CPU", 1}}));
  ASSERT_EQ(h.processes.spawns.size(), 5u);
  h.pool.Replenish(1.0);
  EXPECT_EQ(h.processes.spawns.size(), 8u) << "5 asked within a second, at most 3 kept";
  EXPECT_EQ(h.Spares(), 3);
  h.pool.Replenish(2.0);
  EXPECT_EQ(h.processes.spawns.size(), 8u) << "the spares already started were started again";
}

TEST(PrestartedWorkersTest, ALeaseTakesASpare) {
  PoolHarness h(2);
  h.pool.OnGrantLease(NodeHarness::Lease({{"CPU", 1}}).request);
  h.pool.Replenish(1.0);
  ASSERT_EQ(h.processes.spawns.size(), 2u);
  std::string spare = h.Start(1, 301, "tcp://w1");
  auto lease = NodeHarness::Lease({{"CPU", 1}});
  h.pool.OnGrantLease(lease.request);
  EXPECT_EQ(h.processes.spawns.size(), 2u);
  auto assign = h.outbox.Take<proto::AssignMsg>(MsgType::kAssign, "tcp://w1");
  ASSERT_TRUE(assign);
  EXPECT_FALSE(assign->is_actor);
  h.Accept(spare);
  auto granted = h.outbox.Take<proto::LeaseReplyMsg>(MsgType::kLeaseReply, "tcp://driver");
  ASSERT_TRUE(granted);
  EXPECT_TRUE(granted->ok);
  EXPECT_EQ(granted->lease_id, lease.request.lease_id);
  EXPECT_EQ(granted->worker_address, "tcp://w1-calls");
}

TEST(PrestartedWorkersTest, WorkersWithDevicesAreNeitherPrestartedNorTakenFromSpares) {
  PoolHarness h(4, {{"CPU", 8}, {"GPU", 2}});
  h.pool.OnStartActor(NodeHarness::Actor({{"GPU", 1}}));
  h.pool.Replenish(1.0);
  EXPECT_EQ(h.processes.spawns.size(), 1u) << "a GPU worker's environment is its own";
  h.pool.OnStartActor(NodeHarness::Actor({{"CPU", 1}}));
  h.pool.Replenish(2.0);
  ASSERT_EQ(h.processes.spawns.size(), 3u);
  h.Start(2, 401, "tcp://spare");
  h.pool.OnStartActor(NodeHarness::Actor({{"GPU", 1}}));
  ASSERT_EQ(h.processes.spawns.size(), 4u) << "a GPU actor took a spare";
  EXPECT_EQ(h.processes.spawns[3].env.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(h.Spares(), 1);
}

TEST(PrestartedWorkersTest, SparesOfAnExecutableNoLongerAskedForAreKilled) {
  PoolHarness h(2);
  h.ActorThenTick();
  ASSERT_EQ(h.processes.spawns.size(), 2u);
  h.Start(1, 501, "tcp://w1");
  // The demand was recorded at the monotonic clock's "now"; a tick long after it forgets it.
  h.pool.Replenish(MonotonicSeconds() + WorkerPool::kSpareKeepS + 1);
  EXPECT_EQ(h.processes.killed, std::vector<int>{501});
  h.pool.OnExited(501, "was killed by signal 9");
  EXPECT_EQ(h.Spares(), 0);
  EXPECT_FALSE(h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead))
      << "a spare's death was reported";
}

TEST(PrestartedWorkersTest, NoSparesWhenTurnedOff) {
  PoolHarness h(0);
  for (int i = 0; i < 3; ++i) h.pool.OnStartActor(NodeHarness::Actor({{"CPU", 1}}));
  h.pool.Replenish(1.0);
  EXPECT_EQ(h.processes.spawns.size(), 3u);
  EXPECT_EQ(h.Spares(), 0);
}

TEST(PrestartedWorkersTest, ASpareThatDiesIsForgottenAndNotReportedAsAnActor) {
  PoolHarness h(1);
  h.pool.OnStartActor(NodeHarness::Actor({{"CPU", 1}}));
  h.Accept(h.Start(0, 600, "tcp://w0"));
  while (h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead)) {
  }
  h.pool.Replenish(1.0);
  h.Start(1, 601, "tcp://w1");
  h.pool.OnExited(601, "exited with status 1");
  EXPECT_EQ(h.Spares(), 0);
  EXPECT_FALSE(h.outbox.Take<proto::WorkerEventMsg>(MsgType::kWorkerEvent, NodeHarness::kHead));
  h.pool.OnStartActor(NodeHarness::Actor({{"CPU", 1}}));
  EXPECT_EQ(h.processes.spawns.size(), 3u) << "an actor waited for a dead spare";
}

TEST(PrestartedWorkersTest, ASpareTheZygoteRefusesIsNotAskedForAgainOnEveryTick) {
  PoolHarness h(2);
  h.processes.refuse_spawns = true;
  h.ActorThenTick();
  ASSERT_EQ(h.processes.spawns.size(), 2u) << "the actor's worker and one spare were asked for";
  EXPECT_EQ(h.Spares(), 0) << "a refused spare was kept";
  h.pool.Replenish(2.0);
  h.pool.Replenish(3.0);
  EXPECT_EQ(h.processes.spawns.size(), 2u) << "a refused spare was asked for on every tick";
  h.processes.refuse_spawns = false;
  h.ActorThenTick();  // a new demand asks again
  EXPECT_EQ(h.processes.spawns.size(), 4u);
  EXPECT_EQ(h.Spares(), 1);
}

}  // namespace
}  // namespace orrery::node
