// The node's worker processes (docs/architecture.md "Node"): one per actor, and task
// workers for leases, reused by later leases of the same executable while idle. Owns their
// records from the spawn request to the reaped process: spawns through WorkerProcesses (the
// zygotes) with the devices DeviceAllocator gives and the executable ExecutableCache vouches
// for, hands each its assignment, grants leases, kills, and reports deaths and exits to the
// head and to the leases' holders, all through the Outbox.
//
// Prestarted workers (docs/architecture.md "Prestarted workers"): once an executable has been
// asked for workers without devices, the node keeps started, registered workers of it that
// have no assignment yet ("spares"): the most it was asked for within kDemandWindowS, up to
// `prestarted`; an actor or a lease of that executable takes one instead of forking,
// and Replenish (on the node's tick) starts their successors in the background. An
// executable not asked for again within kSpareKeepS loses its spares.
//
// Not thread-safe: used on the node's inbox thread only.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "core/internal/call_stats.h"
#include "core/internal/outbox.h"
#include "core/internal/protocol.h"
#include "core/internal/recent_ids.h"
#include "node/src/device_allocator.h"
#include "node/src/executable_cache.h"
#include "node/src/head_events.h"
#include "node/src/log_monitor.h"
#include "node/src/worker_processes.h"
#include "objects/internal/node_object_plane.h"
#include "orrery/config.h"

namespace orrery::node {

struct WorkerPoolOptions {
  std::string head_address;
  std::string node_id;   // binary
  std::string node_hex;  // hex, in messages and workers' environment
  std::string node_secret;
  // The command line of the executable workers run when a request names none.
  std::vector<std::string> worker_argv;
  std::string log_dir;  // workers write worker-<pid>.out/.err there
  // The most prestarted workers kept per executable (0: none).
  int prestarted = 0;
};

class WorkerPool {
 public:
  struct Worker {
    std::string id;  // binary WorkerId
    int pid = 0;
    std::string address;       // control
    std::string call_address;  // calls
    bool is_actor = false;
    proto::StartActorMsg actor;
    bool has_lease = false;
    proto::LeaseRequestMsg lease;
    bool spare = false;     // prestarted: no assignment yet, waiting to be taken
    bool ready = false;     // assignment accepted
    bool reported = false;  // death already reported to the head
    bool kill_requested = false;
    std::string kill_reason;
    // The error kind its death reports when not the default.
    proto::ErrorKind kill_kind = proto::ErrorKind::kNone;
    double started = 0;  // when it took its current actor or lease (for the memory monitor)
    double idle_since = 0;
    double wall_started = 0;        // when its process was asked for, seconds since the epoch
    std::vector<std::string> argv;  // while waiting for the executable; a spare's command line
    std::string executable;  // content hash ("": worker_argv): lease workers are reused only for it
    DeviceIds devices;       // accelerator ids this process owns
    std::map<std::string, std::string> device_env;  // what makes them visible to it
    // Its request's runtime env (variables and working folder): lease workers are reused
    // only for the same one, and only a worker without one is prestarted.
    proto::RuntimeEnvMsg runtime_env;
    // The folder it starts in on this host: the runtime env's working_dir itself, or this
    // node's copy of its package (empty until known).
    std::string working_dir;
  };

  WorkerPool(WorkerPoolOptions options, Outbox& outbox, DeviceAllocator& devices,
             ExecutableCache& executables, WorkerProcesses& processes);
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Set when the node starts: its inbox (workers' ORRERY_NODE_ADDRESS, the head's replies),
  // the log monitor, the object plane (told of exited processes). None before.
  void SetNode(const std::string& address, LogMonitor* logs, objects::NodeObjectPlane* objects);

  void OnStartActor(const proto::StartActorMsg& m);
  void OnGrantLease(const proto::LeaseRequestMsg& r);
  void OnReleaseLease(const std::string& lease_id);
  void OnKillWorker(const proto::KillWorkerMsg& m);
  void OnWorkerRegister(const proto::WorkerRegisterMsg& m);
  void OnAssignReply(const proto::AssignReplyMsg& m);
  // A worker's kWorkerStats report (its id in hex); a stranger's or a bad one is dropped.
  void OnWorkerStats(proto::WorkerStatsMsg m);
  // The executable or working_dir package with this hash, that worker `worker_id` waited
  // for, was fetched (error empty) or could not be: go on preparing the worker, or fail it.
  void OnExecutable(const std::string& worker_id, const std::string& hash, bool package,
                    const std::string& error);
  // WorkerProcesses' events.
  void OnSpawned(uint64_t request, int pid);
  // A spawn request its zygote will never answer (it died, or could not take it).
  void OnSpawnFailed(uint64_t request, const std::string& cause);
  void OnExited(int pid, const std::string& how);

  // Starts the spares that executables in demand lack; kills those of executables no longer
  // asked for. On the node's tick.
  void Replenish(double now);
  // How long an executable keeps its spares after it was last asked for a worker.
  static constexpr double kSpareKeepS = 60;
  // The window a burst's demand is counted over.
  static constexpr double kDemandWindowS = 1;
  // At most this many executables have spares at once (the least recently asked lose theirs).
  static constexpr size_t kMaxSpareExecutables = 4;

  // The head's acknowledgement of a worker event (true when `request_id` was one), and the
  // resend of those it has not acknowledged (on the node's tick): node/src/head_events.h.
  bool OnEventAck(uint64_t request_id) { return events_.OnAck(request_id); }
  void ResendEvents(double now) { events_.Resend(now); }

  // Kills idle task workers beyond the `kept` first ones idle for longer than timeout_s.
  void ReapIdle(double now, int kept, double timeout_s);
  // Kills the worker `id` (the memory monitor's victim), its death reported as `kind`.
  void KillAs(const std::string& id, proto::ErrorKind kind, const std::string& reason);
  // Kills every worker process and forgets them, removing the socket files their inboxes
  // leave (the node stops, after WorkerProcesses::StopAll).
  void KillAll();

  const std::map<std::string, Worker>& workers() const { return workers_; }
  // Whether a worker of this node starts or runs in `folder`.
  bool UsesFolder(const std::string& folder) const {
    for (const auto& [id, w] : workers_)
      if (w.working_dir == folder) return true;
    return false;
  }
  bool Has(const std::string& id) const { return workers_.count(id) > 0; }
  const NodeCallStats& call_stats() const { return call_stats_; }
  // What a worker's log lines are attributed to (its actor or lease, its job).
  static proto::LogLinesMsg LogSource(const Worker& w);

 private:
  // An executable that has spares: its hash ("": worker_argv) and command line.
  using SpareKey = std::pair<std::string, std::vector<std::string>>;
  // Creates the worker record and spawns its process, or queues it until the driver's
  // executable (named by hash) has been fetched from the head. On failure the record has
  // kill_requested set with the reason (also for a runtime env this node cannot give: a
  // malformed one, or a working folder it lacks).
  Worker& NewWorker(bool is_actor, const std::vector<std::string>& argv, const std::string& hash,
                    const std::string& arch, const Resources& demand,
                    const proto::RuntimeEnvMsg& runtime_env);
  // Fetches what the worker lacks on this host (its working_dir's package, then its
  // executable), one at a time: OnExecutable calls it again when each arrives. Spawns it
  // (or gives its request to a spare, returned) once nothing is missing.
  Worker& Prepare(Worker& w);
  void Spawn(Worker& w, const std::vector<std::string>& argv);
  // Starts the worker `w` of a request without devices running argv: a spare of the same
  // executable takes its place when there is one (w is erased, the spare returned, its
  // assignment sent by Assign once the caller has filled it in); otherwise spawns it.
  // Counts the demand for Replenish.
  Worker& SpawnOrTakeSpare(Worker& w, const std::vector<std::string>& argv);
  // Spawns a spare of `key`; false (and no record) when the zygote did not take it.
  bool StartSpare(const SpareKey& key, double now);
  // Sends a registered worker its assignment (actor or lease); nothing before it registered.
  void Assign(Worker& w);
  // Sends the head `ev` as an event of `kind` from this node (with its id and secret).
  void Report(proto::WorkerEventKind kind, proto::WorkerEventMsg ev);
  void WatchLogs(const Worker& w);
  void FailWorker(Worker& w, const std::string& reason);
  // Gives the worker's devices back to devices_.
  void ReleaseDevices(Worker& w);
  void Erase(const std::string& worker_id);
  void Kill(Worker& w, const std::string& reason);
  void GrantTo(Worker& w);
  void ForgetHolder(const Worker& gone);
  void LeaseFailed(const proto::LeaseRequestMsg& r, proto::ErrorKind kind,
                   const std::string& message);
  void ReportAlive(const Worker& w);
  void ActorDied(Worker& w, proto::ErrorKind kind, const std::string& cause);
  Worker* ByActor(const std::string& actor_id);
  Worker* ByLease(const std::string& lease_id);

  WorkerPoolOptions options_;
  Outbox& outbox_;
  DeviceAllocator& devices_;
  ExecutableCache& executables_;
  WorkerProcesses& processes_;
  std::string node_address_;
  HeadEvents events_{outbox_, options_.head_address};
  LogMonitor* logs_ = nullptr;
  objects::NodeObjectPlane* objects_ = nullptr;
  std::map<std::string, Worker> workers_;
  std::map<int, std::string> by_pid_;
  std::map<uint64_t, std::string> by_spawn_;
  uint64_t next_spawn_ = 1;
  // The environment DeviceAllocator gives a worker without devices: a spare's.
  std::map<std::string, std::string> no_device_env_;
  // Executables asked for workers without devices.
  struct SpareDemand {
    double last = 0;           // when last asked
    std::deque<double> asked;  // when, within the last kDemandWindowS (at most `prestarted`)
    int target = 0;            // spares kept: the most asked within a window, up to `prestarted`
  };
  std::map<SpareKey, SpareDemand> spare_demand_;
  NodeCallStats call_stats_;  // the workers' kWorkerStats reports
  // The leases that ended on this node (released, or their worker died): a grant of one
  // that comes again later (the head resends a grant when its holder asks again) starts
  // no worker; it is answered as failed, so that the head lets it go too.
  static constexpr size_t kEndedLeasesKept = 10000;
  RecentIds<std::string> ended_leases_{kEndedLeasesKept};
};

}  // namespace orrery::node
