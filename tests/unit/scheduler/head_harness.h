// The head's managers wired together as HeadService wires them, without sockets: messages
// go to a RecordingOutbox, state to an InMemoryStateStore. For the managers' unit tests.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/internal/protocol.h"
#include "core/internal/state_store.h"
#include "scheduler/src/head_managers.h"
#include "tests/fakes/recording_outbox.h"

namespace orrery::scheduler::testing {

using ::orrery::testing::RecordingOutbox;

// A store whose writes are stored only when the test says so (Store()).
class SlowStore final : public InMemoryStateStore {
 public:
  void WhenWritten(std::function<void()> done) override { waiting.push_back(std::move(done)); }
  void Store() {
    auto all = std::move(waiting);
    waiting.clear();
    for (auto& done : all) done();
  }
  std::vector<std::function<void()>> waiting;
};

// The managers of one head, over `store` (a restarted head: a second harness on the same
// store), wired as a HeadService wires them (HeadManagers), with a recording outbox.
struct HeadHarness {
  explicit HeadHarness(std::shared_ptr<InMemoryStateStore> s = nullptr,
                       std::string binary_dir = "/nonexistent-binaries")
      : store(s ? s : std::make_shared<InMemoryStateStore>()),
        outbox(std::make_shared<RecordingOutbox>()),
        m(HeadContext{store, outbox}, std::move(binary_dir)) {}
  // As HeadService::Recover.
  void Restore(double now) {
    auto tables = ReadTables(*store);
    m.Restore(tables.value(), now);
  }
  // The records of one table of the store.
  TableRecords Table(const std::string& table) { return store->GetAll(table).value(); }

  // Registers a node with `total` resources; returns its binary id.
  std::string AddNode(Resources total, Labels labels = {}, const std::string& secret = "s3cret",
                      double now = 0) {
    proto::RegisterNodeMsg m;
    NodeId id = NodeId::Random();
    m.node.node_id = id.Binary();
    m.node.address = "tcp://node-" + id.Hex().substr(0, 8);
    m.node.total = total;
    m.node.labels = std::move(labels);
    m.node_secret = secret;
    int index = -1;
    nodes.OnRegister(m, now, &index);
    queue.ScheduleAll(now);
    return id.Binary();
  }
  // Registers a job (no executable hash) whose entrypoint is /bin/app; returns its id.
  std::string AddJob(double now = 0) {
    proto::JobMsg j;
    j.job_id = JobId::Random().Binary();
    j.entrypoint = "/bin/app";
    j.reply_to = "tcp://driver";
    jobs.OnRegister(j, now);
    outbox->Take<proto::AckMsg>(proto::MsgType::kAck, "tcp://driver");
    return j.job_id;
  }
  proto::CreateActorMsg ActorRequest(const std::string& job, Resources resources,
                                     const std::string& name = "") {
    proto::CreateActorMsg m;
    m.request_id = 7;
    m.reply_to = "tcp://driver";
    m.spec.actor_id = ActorId::Random().Binary();
    m.spec.job_id = job;
    m.spec.factory = "Counter";
    m.spec.owner = "tcp://driver";
    m.spec.argv = {"/bin/app"};
    m.spec.options.resources = std::move(resources);
    m.spec.options.name = name;
    return m;
  }
  proto::LeaseRequestMsg LeaseRequest(const std::string& job, Resources resources) {
    proto::LeaseRequestMsg m;
    m.request_id = 9;
    m.lease_id = UniqueId::Random().Binary();
    m.reply_to = "tcp://driver";
    m.resources = std::move(resources);
    m.job_id = job;
    m.argv = {"/bin/app"};
    return m;
  }
  double Available(const std::string& node_id, const std::string& resource) {
    const Resources& a = nodes.at(nodes.Index(node_id)).view.available;
    auto it = a.find(resource);
    return it == a.end() ? 0 : it->second;
  }

  std::shared_ptr<InMemoryStateStore> store;
  std::shared_ptr<RecordingOutbox> outbox;
  HeadManagers m;
  HeadContext& ctx = m.ctx;
  NodeManager& nodes = m.nodes;
  SchedulingQueue& queue = m.queue;
  PlacementGroupManager& pgs = m.pgs;
  JobManager& jobs = m.jobs;
  SubmissionManager& submissions = m.submissions;
  DriverRecords& records = m.records;
  ResourceBook& book = m.book;
  ActorManager& actors = m.actors;
  LeaseManager& leases = m.leases;
};

}  // namespace orrery::scheduler::testing
