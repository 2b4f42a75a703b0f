// The node daemon (docs/architecture.md "Node"): registers the host's resources and labels
// with the head, starts one worker process per actor (and task workers for leases) through
// the zygote, hands them their assignment, supervises them and reports exits to the head.
// All state lives on the node's inbox thread.
//
// NodeService dispatches the node's messages (Dispatch) to parts that each own one thing:
// HeadLink (the registration and heartbeats), WorkerPool (worker processes: actors and
// leases), DeviceAllocator (accelerator devices), ExecutableCache (what the node may run,
// fetched from the head), JobRunner (submitted jobs' drivers), WorkerProcesses (the
// zygotes, behind an interface), LogMonitor, MemoryMonitor. It keeps the tick (heartbeat,
// the memory monitor's kills, metrics) and `orrery list workers` (node_listing.cc). Everything it
// sends goes through one Outbox.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/internal/metrics_server.h"
#include "core/internal/outbox.h"
#include "core/internal/protocol.h"
#include "core/internal/transport.h"
#include "node/src/device_allocator.h"
#include "node/src/executable_cache.h"
#include "node/src/head_link.h"
#include "node/src/job_runner.h"
#include "node/src/log_monitor.h"
#include "node/src/memory_monitor.h"
#include "node/src/process_cgroup.h"
#include "node/src/worker_pool.h"
#include "node/src/worker_processes.h"
#include "objects/internal/node_object_plane.h"
#include "orrery/config.h"
#include "orrery/ids.h"
#include "orrery/status.h"

namespace orrery::node {

using objects::NodeObjectPlane;
using objects::ObjectPlaneOptions;

struct NodeOptions {
  std::string head_address;
  std::string bind_host = "127.0.0.1";
  std::string advertise_host;
  Resources resources;
  Labels labels;
  // The command line of the executable workers run when a request names none (the
  // embedded node: the driver itself). Requests from drivers elsewhere name theirs.
  std::vector<std::string> worker_argv;
  std::map<std::string, std::string> worker_env;  // passed to every worker
  int idle_workers_kept = 2;
  // Started workers kept ready, with no assignment, per executable in demand (worker_pool.h);
  // 0: every worker is forked when asked for.
  int prestarted_workers = 0;
  double idle_worker_timeout_s = 10;
  double heartbeat_period_s = 1.0;
  // Where executables fetched from the head are cached; empty: $ORRERY_TMPDIR (or
  // /tmp/orrery) + "/node_binaries".
  std::string binary_cache_dir;
  // Device ids per accelerator kind ("TPU", "GPU", "XPU") that workers are given; kinds
  // with a resource but no entry get 0..n-1.
  std::map<std::string, std::vector<int>> accelerator_ids;
  // The memory monitor (memory_monitor.h): above this fraction of memory in use a worker is
  // killed; it reads every refresh period (0: it only reads for the heartbeat and kills
  // nothing). Memory is read under `sysroot` ("": $ORRERY_SYSROOT, else the real host).
  double memory_usage_threshold = 0.95;
  int memory_monitor_refresh_ms = 250;
  std::string sysroot;
  // The shared-memory object store (node_object_plane.h): capacity in bytes (0: 30% of
  // memory) and the directory it spills into (a directory of its own is made inside).
  uint64_t object_store_memory = 0;
  std::string object_spill_dir;
  // Where workers' and submitted jobs' stdout and stderr go (docs/logs.md); empty:
  // $ORRERY_TMPDIR (or /tmp/orrery) + "/logs/node-<id>". A file is rotated past
  // log_rotate_bytes, keeping log_rotate_backups old copies.
  std::string log_dir;
  uint64_t log_rotate_bytes = 100ull << 20;
  int log_rotate_backups = 5;
  // The metrics endpoint (docs/metrics.md) on bind_host: -1 none, 0 any free port.
  int metrics_port = -1;
  // Called once, on the inbox thread, when the head refuses this node after Start returned
  // (a heartbeat answered ok=false, e.g. the autoscaler removed the node): the node has
  // stopped heartbeating and its owner should Stop it (refusal() says why). A refusal of
  // the first registration is Start's error instead.
  std::function<void(const Status&)> on_refused;
};

class NodeService {
 public:
  explicit NodeService(NodeOptions options);
  // With what it sends through and how it starts worker processes given (unit tests: a
  // RecordingOutbox and a fake; tests/unit/node/node_harness.h).
  NodeService(NodeOptions options, Outbox& outbox, const WorkerProcessesFactory& processes);
  ~NodeService();
  // Starts the zygote and the inbox, then registers with the head and waits for its answer:
  // PermissionDenied with the head's reason when the head refuses the node, Unavailable when
  // it does not answer within register_timeout_ms.
  Status Start(int register_timeout_ms = 10000);
  void Stop();
  const std::string& address() const { return inbox_.address(); }
  const NodeId& id() const { return id_; }
  // OK, or why the head refused this node (then it no longer heartbeats). Any thread.
  Status refusal() const { return head_.refusal(); }
  // Decodes a message and hands it to its handler, as the inbox does (Start), on the calling
  // thread: InvalidArgument for a message that does not decode as its type says, or of a
  // type the node does not handle; nothing is changed then. Without Start, tests feed the
  // node's messages through it (one thread; workers' logs are not watched).
  Status Dispatch(const transport::Envelope& env);
  // "host:port" of GET /metrics; "" when metrics are off.
  const std::string& metrics_address() const { return metrics_address_; }

 private:
  // The inbox's handler: Dispatch, and a failed Status answered with kError and logged.
  Status Handle(transport::Envelope& env);
  // The head's kAck: of a worker event (its request id), for pool_; otherwise the answer to
  // a registration or heartbeat, for head_: a refusal after Start ends the heartbeats and
  // calls options_.on_refused.
  Status OnHeadAck(const transport::Envelope& env);
  // `orrery list workers`: this node's worker processes and job drivers.
  void OnListWorkers(const proto::ListWorkersMsg& m);
  void Tick();
  // The metrics endpoint, where options_.metrics_port asks for one.
  Status StartMetrics();
  // Renders the metrics for the server (every tick at most once a second).
  void RenderMetrics(double now);
  // On every tick: reads memory and, above the threshold, kills one worker (memory_monitor.h).
  void CheckMemory();
  void SendRegistration(bool alive);
  // The registration (a heartbeat when alive, the goodbye when not) as it stands.
  proto::RegisterNodeMsg Registration(bool alive);

  // The head's kBinaryReply: resumes the jobs and workers that waited for the executable.
  void OnBinaryReply(const proto::BinaryMsg& m, std::string bytes);
  // Hands what was fetched (or could not be) to the workers and jobs that waited for it.
  void Deliver(const std::string& hash, const ExecutableCache::Fetched& fetched);

  NodeOptions options_;
  NodeId id_;
  std::string secret_;  // sent with every node-scoped message (RegisterNodeMsg::node_secret)
  Outbox& outbox_;
  HeadLink head_;  // the registration and heartbeats; its own lock (Start waits on it)
  transport::Inbox inbox_;
  // The jobs' and workers' cgroups; null where cgroup v2 cannot be used. Declared before
  // the jobs and zygotes, so it goes (killing what is left in it) after them.
  std::unique_ptr<CgroupTree> cgroups_;
  // Zygotes by executable; started, replaced and polled on the inbox thread (a zygote dies
  // with the thread that made it, PR_SET_PDEATHSIG, and this thread lives as the node).
  std::unique_ptr<WorkerProcesses> zygotes_;
  // The executables this node runs, checked by SHA-256 and fetched from the head; its
  // waiters are worker ids, or JobRunner::kWaiter + a submission id, resumed by OnBinaryReply.
  ExecutableCache cache_;
  DeviceAllocator devices_;
  std::unique_ptr<WorkerPool> pool_;  // the worker processes (made once zygotes_ is)
  MemoryMonitor memory_;
  // Started with the inbox; its own lock guards what its server threads share.
  std::unique_ptr<NodeObjectPlane> objects_;
  std::string oom_victim_;  // the worker killed for memory, until its process is gone
  double oom_victim_since_ = 0;
  double last_heartbeat_ = 0;
  std::unique_ptr<LogMonitor> logs_;
  bool own_log_dir_ = false;         // made for this node (no log_dir given): removed when it stops
  std::unique_ptr<JobRunner> jobs_;  // submitted jobs' drivers
  std::unique_ptr<metrics::MetricsServer> metrics_;
  std::string metrics_address_;  // set before the inbox starts
  double metrics_rendered_ = 0;

  // Everything above is used on the inbox thread only (Stop kills the workers once that
  // thread has ended): no lock. Only the registration handshake (head_) crosses threads.
};

}  // namespace orrery::node
