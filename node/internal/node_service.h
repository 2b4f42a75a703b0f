// The node daemon (docs/architecture.md "Node"): registers the host's resources and labels
// with the head, starts one worker process per actor (and task workers for leases) through
// the zygote, hands them their assignment, supervises them and reports exits to the head.
// All state lives on the node's inbox thread.
//
// NodeService dispatches the node's messages (Dispatch) to its handlers, in five files along
// their seams: node_service.cc (dispatch, the tick, the memory monitor's kills),
// node_spawn.cc (spawns through the zygotes), node_workers.cc (worker registration,
// assignment, kills, deaths and exits), node_leases.cc (task leases), node_listing.cc
// (`orrery list workers`, what workers' log lines are attributed to). Parts that each own
// one thing: HeadLink (the registration and heartbeats), DeviceAllocator (accelerator
// devices), ExecutableCache (what the node may run, fetched from the head), JobRunner
// (submitted jobs' drivers), WorkerProcesses (the zygotes, behind an interface),
// LogMonitor, MemoryMonitor. Everything it sends goes through one Outbox.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/internal/call_stats.h"
#include "core/internal/metrics_server.h"
#include "core/internal/outbox.h"
#include "core/internal/protocol.h"
#include "core/internal/thread_annotations.h"
#include "core/internal/transport.h"
#include "node/src/device_allocator.h"
#include "node/src/executable_cache.h"
#include "node/src/head_link.h"
#include "node/src/job_runner.h"
#include "node/src/log_monitor.h"
#include "node/src/memory_monitor.h"
#include "node/src/worker_processes.h"
#include "node/src/zygote_pool.h"
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
  struct Worker {
    std::string id;  // binary WorkerId
    int pid = 0;
    std::string address;       // control
    std::string call_address;  // calls
    bool is_actor = false;
    proto::StartActorMsg actor;
    bool has_lease = false;
    proto::LeaseRequestMsg lease;
    bool ready = false;     // assignment accepted
    bool reported = false;  // death already reported to the head
    bool kill_requested = false;
    std::string kill_reason;
    // The error kind its death reports when not the default.
    proto::ErrorKind kill_kind = proto::ErrorKind::kNone;
    double started = 0;  // when it took its current actor or lease (for the memory monitor)
    double idle_since = 0;
    double wall_started = 0;        // when its process was asked for, seconds since the epoch
    std::vector<std::string> argv;  // while waiting for the executable
    std::string executable;  // content hash ("": worker_argv): lease workers are reused only for it
    DeviceIds devices;       // accelerator ids this process owns
    std::map<std::string, std::string> device_env;  // what makes them visible to it
  };

  // The inbox's handler: Dispatch, and a failed Status answered with kError and logged.
  void Handle(transport::Envelope& env);
  // The head's answer to a registration or heartbeat (kAck): a refusal after Start ends the
  // heartbeats and calls options_.on_refused.
  Status OnRegistrationAnswer(const transport::Envelope& env);
  void OnWorkerStats(proto::WorkerStatsMsg m);
  // `orrery list workers`: this node's worker processes and job drivers.
  void OnListWorkers(const proto::ListWorkersMsg& m);
  // What a worker's log lines are attributed to (its actor or lease, its job).
  proto::LogLinesMsg LogSource(const Worker& w) const;
  void WatchLogs(const Worker& w);
  void OnStartActor(const proto::StartActorMsg& m);
  void OnGrantLease(const proto::LeaseRequestMsg& r);
  void OnReleaseLease(const std::string& lease_id);
  void OnKillWorker(const proto::KillWorkerMsg& m);
  void OnWorkerRegister(const proto::WorkerRegisterMsg& m);
  void OnAssignReply(const proto::AssignReplyMsg& m);
  void OnSpawned(uint64_t request, int pid);
  void OnExited(int pid, const std::string& how);
  void Tick();
  // Renders the metrics for the server (every tick at most once a second).
  void RenderMetrics(double now);
  // On every tick: reads memory and, above the threshold, kills one worker (memory_monitor.h).
  void CheckMemory();
  void SendRegistration(bool alive);

  // Creates the worker record and spawns its process, or queues it until the driver's
  // executable (named by hash) has been fetched from the head. On failure the record has
  // kill_requested set with the reason.
  Worker& NewWorker(bool is_actor, const std::vector<std::string>& argv, const std::string& hash,
                    const std::string& arch, const Resources& demand);
  void Spawn(Worker& w, const std::vector<std::string>& argv);
  void OnBinaryReply(const proto::BinaryMsg& m, const std::string& bytes);
  void FailWorker(Worker& w, const std::string& reason);
  // Gives the worker's devices back to devices_.
  void ReleaseDevices(Worker& w);
  void Erase(const std::string& worker_id);
  // A spawn request its zygote will never answer (it died, or could not take it).
  void OnSpawnFailed(uint64_t request, const std::string& cause);
  void Kill(Worker& w, const std::string& reason);
  void GrantTo(Worker& w);
  void LeaseFailed(const proto::LeaseRequestMsg& r, proto::ErrorKind kind,
                   const std::string& message);
  void ActorDied(Worker& w, proto::ErrorKind kind, const std::string& cause);
  Worker* ByActor(const std::string& actor_id);
  Worker* ByLease(const std::string& lease_id);

  NodeOptions options_;
  NodeId id_;
  std::string secret_;  // sent with every node-scoped message (RegisterNodeMsg::node_secret)
  Outbox& outbox_;
  HeadLink head_;  // the registration and heartbeats; its own lock (Start waits on it)
  std::atomic<bool> started_{false};  // Start has returned OK
  transport::Inbox inbox_;
  // Zygotes by executable; started, replaced and polled on the inbox thread (a zygote dies
  // with the thread that made it, PR_SET_PDEATHSIG, and this thread lives as the node).
  std::unique_ptr<WorkerProcesses> zygotes_;
  std::map<std::string, Worker> workers_;
  std::map<int, std::string> by_pid_;
  std::map<uint64_t, std::string> by_spawn_;
  uint64_t next_spawn_ = 1;
  // The executables this node runs, checked by SHA-256 and fetched from the head; its
  // waiters are worker ids, or JobRunner::kWaiter + a submission id, resumed by OnBinaryReply.
  ExecutableCache cache_;
  DeviceAllocator devices_;
  MemoryMonitor memory_;
  // Started with the inbox; its own lock guards what its server threads share.
  std::unique_ptr<NodeObjectPlane> objects_;
  std::string oom_victim_;  // the worker killed for memory, until its process is gone
  double oom_victim_since_ = 0;
  double last_heartbeat_ = 0;
  std::unique_ptr<LogMonitor> logs_;
  bool own_log_dir_ = false;         // made for this node (no log_dir given): removed when it stops
  std::unique_ptr<JobRunner> jobs_;  // submitted jobs' drivers
  NodeCallStats call_stats_;         // the workers' kWorkerStats reports
  std::unique_ptr<metrics::MetricsServer> metrics_;
  std::string metrics_address_;  // set before the inbox starts
  double metrics_rendered_ = 0;

  // Everything above is used on the inbox thread only (Stop touches workers_ once that
  // thread has ended): no lock. Only the registration handshake (head_) crosses threads.
};

}  // namespace orrery::node
