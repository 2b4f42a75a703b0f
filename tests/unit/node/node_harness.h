// The node's dispatcher (NodeService::Dispatch) as a NodeService wires it, without its inbox,
// sockets or processes: messages go to a RecordingOutbox, worker processes to a fake that
// records what it was asked (the test answers as the zygote would). For the node's unit
// tests (as tests/unit/scheduler/head_harness.h is for the head's).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "node/internal/node_service.h"
#include "node/src/worker_processes.h"
#include "orrery/ids.h"
#include "tests/fakes/recording_outbox.h"

namespace orrery::node::testing {

using ::orrery::testing::MakeEnvelope;
using ::orrery::testing::RecordingOutbox;

// Records spawn requests and kills; the test delivers their outcome through events().
class FakeWorkerProcesses final : public WorkerProcesses {
 public:
  struct SpawnRequest {
    std::vector<std::string> argv;
    uint64_t request_id = 0;
    std::map<std::string, std::string> env;
  };
  explicit FakeWorkerProcesses(ZygoteEvents events) : events_(std::move(events)) {}
  int fd() const override { return -1; }
  void OnReady() override {}
  Status Prepare(const std::vector<std::string>&) override { return Status::Ok(); }
  Status Spawn(const std::vector<std::string>& argv, uint64_t request_id,
               const std::map<std::string, std::string>& env) override {
    spawns.push_back({argv, request_id, env});
    return refuse_spawns ? Status::Unavailable("no zygote") : Status::Ok();
  }
  void Kill(int pid) override { killed.push_back(pid); }
  void StopAll() override {}
  const ZygoteEvents& events() const { return events_; }

  std::vector<SpawnRequest> spawns;
  std::vector<int> killed;
  bool refuse_spawns = false;  // Spawn answers Unavailable

 private:
  ZygoteEvents events_;
};

struct NodeHarness {
  static constexpr const char* kHead = "tcp://head";

  // A node with `resources` whose own worker program is /bin/worker, giving its workers
  // `worker_env`.
  explicit NodeHarness(Resources resources = {{"CPU", 4}},
                       std::map<std::string, std::string> worker_env = {}) {
    NodeOptions o;
    o.head_address = kHead;
    o.resources = std::move(resources);
    o.worker_argv = {"/bin/worker"};
    o.worker_env = std::move(worker_env);
    o.binary_cache_dir = "/nonexistent-node-binaries";
    node = std::make_unique<NodeService>(
        std::move(o), outbox, [this](std::map<std::string, std::string> env, ZygoteEvents events) {
          zygote_env = std::move(env);
          auto p = std::make_unique<FakeWorkerProcesses>(std::move(events));
          processes = p.get();
          return p;
        });
  }

  template <typename Meta>
  Status Feed(proto::MsgType type, const Meta& meta) {
    auto env = MakeEnvelope(type, meta);
    return node->Dispatch(env);
  }

  // The worker process of spawn request `i` started as `pid` and registered at `address`.
  // Returns its worker id (hex).
  std::string StartWorker(size_t i, int pid, const std::string& address) {
    const auto& spawn = processes->spawns.at(i);
    processes->events().spawned(spawn.request_id, pid);
    std::string worker_id = spawn.env.at("ORRERY_WORKER_ID");
    proto::WorkerRegisterMsg reg{worker_id, address, pid, address + "-calls"};
    EXPECT_TRUE(Feed(proto::MsgType::kWorkerRegister, reg).ok());
    return worker_id;
  }
  // The worker accepted its assignment.
  void Accept(const std::string& worker_id) {
    proto::AssignReplyMsg reply;
    reply.worker_id = worker_id;
    EXPECT_TRUE(Feed(proto::MsgType::kAssignReply, reply).ok());
  }

  static proto::StartActorMsg Actor(Resources resources) {
    proto::StartActorMsg m;
    m.spec.actor_id = ActorId::Random().Binary();
    m.spec.job_id = JobId::Random().Binary();
    m.spec.factory = "Counter::Create";
    m.spec.options.resources = std::move(resources);
    return m;
  }
  static proto::GrantLeaseMsg Lease(Resources resources) {
    proto::GrantLeaseMsg m;
    m.request.request_id = 9;
    m.request.lease_id = UniqueId::Random().Binary();
    m.request.reply_to = "tcp://driver";
    m.request.resources = std::move(resources);
    return m;
  }

  RecordingOutbox outbox;
  FakeWorkerProcesses* processes = nullptr;       // owned by node
  std::map<std::string, std::string> zygote_env;  // the environment the zygotes were given
  std::unique_ptr<NodeService> node;
};

}  // namespace orrery::node::testing
