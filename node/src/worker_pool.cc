// The node's workers once started (node_service.h): their registration and assignment,
// their devices, kills, deaths and exits, reported to the head (docs/architecture.md "Node").
#include "node/src/worker_pool.h"

#include <signal.h>

#include <algorithm>

#include "core/internal/clock.h"
#include "core/internal/log.h"
#include "core/internal/transport.h"

namespace orrery::node {

using proto::MsgType;

namespace {

std::string HexId(const std::string& binary) {
  return binary.size() == UniqueId::kSize ? UniqueId::FromBinary(binary).Hex() : "";
}
}  // namespace

WorkerPool::WorkerPool(WorkerPoolOptions options, Outbox& outbox, DeviceAllocator& devices,
                       ExecutableCache& executables, WorkerProcesses& processes)
    : options_(std::move(options)),
      outbox_(outbox),
      devices_(devices),
      executables_(executables),
      processes_(processes) {
  auto none = devices_.Assign({}, options_.node_hex.substr(0, 12));  // takes nothing
  if (none.ok()) no_device_env_ = none.value().env;
}

void WorkerPool::SetNode(const std::string& address, LogMonitor* logs,
                         objects::NodeObjectPlane* objects) {
  node_address_ = address;
  events_.SetReplyTo(address);
  logs_ = logs;
  objects_ = objects;
}

void WorkerPool::OnWorkerStats(proto::WorkerStatsMsg m) {
  // Only a worker of this node's counts count (it names itself in hex, as its environment
  // does); a bad report is dropped, with no reply.
  m.worker_id = UniqueId::FromHex(m.worker_id).Binary();
  if (workers_.count(m.worker_id) && !call_stats_.Update(m))
    LOG_DEBUG("node: dropped a malformed worker stats report");
}

void WorkerPool::ReapIdle(double now, int kept, double timeout_s) {
  int idle = 0;
  for (auto& [id, w] : workers_) {
    if (w.is_actor || !w.ready || w.has_lease || w.kill_requested) continue;
    if (++idle > kept && now - w.idle_since > timeout_s) Kill(w, "idle");
  }
}

void WorkerPool::KillAs(const std::string& id, proto::ErrorKind kind, const std::string& reason) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  it->second.kill_kind = kind;
  Kill(it->second, reason);
}

void WorkerPool::KillAll() {
  for (auto& [id, w] : workers_) {
    if (w.pid > 0) processes_.Kill(w.pid);
    // The zygotes' workers have ended (WorkerProcesses::StopAll comes first): nothing of
    // theirs removes the socket files of their same-host channel.
    for (const std::string* a : {&w.address, &w.call_address}) {
      if (!a->empty()) transport::ForgetLocalPeer(*a);
    }
  }
  workers_.clear();
  by_pid_.clear();
  by_spawn_.clear();
}

proto::LogLinesMsg WorkerPool::LogSource(const Worker& w) {
  proto::LogLinesMsg s;
  s.pid = w.pid;
  if (w.is_actor) {
    s.job_id = HexId(w.actor.spec.job_id);
    s.actor_id = HexId(w.actor.spec.actor_id);
    // The factory is "Counter::Create": the prefix names the class, as Ray's does.
    s.name = w.actor.spec.factory;
    if (size_t colons = s.name.rfind("::"); colons != std::string::npos && colons > 0)
      s.name.resize(colons);
  } else {
    s.job_id = w.has_lease ? HexId(w.lease.job_id) : "";
    s.name = "task";
  }
  return s;
}

void WorkerPool::WatchLogs(const Worker& w) {
  if (w.pid <= 0 || !logs_) return;  // no monitor before the node starts
  logs_->Watch(w.pid, options_.log_dir + "/worker-" + std::to_string(w.pid), LogSource(w));
}

void WorkerPool::FailWorker(Worker& w, const std::string& reason) {
  // A worker that can never be started for this request (its runtime env) fails the actor's
  // creation, which no restart would change.
  if (w.is_actor)
    ActorDied(
        w, w.kill_kind == proto::ErrorKind::kNone ? proto::ErrorKind::kActorDiedError : w.kill_kind,
        reason);
  if (w.has_lease) LeaseFailed(w.lease, proto::ErrorKind::kError, reason);
  Erase(w.id);
}

void WorkerPool::ReleaseDevices(Worker& w) {
  devices_.Release(w.devices);
  w.devices.clear();
}

void WorkerPool::Erase(const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  auto pid = by_pid_.find(it->second.pid);
  if (pid != by_pid_.end() && pid->second == worker_id) by_pid_.erase(pid);
  ReleaseDevices(it->second);
  call_stats_.Retire(worker_id);
  workers_.erase(it);
}

void WorkerPool::OnStartActor(const proto::StartActorMsg& m) {
  // Sent again (a restarted head whose placement of it was never stored placed it here
  // again): one worker per incarnation. A starting one reports itself; a running one is
  // reported again.
  for (auto& [id, had] : workers_) {
    if (!had.is_actor || had.actor.spec.actor_id != m.spec.actor_id ||
        had.actor.incarnation != m.incarnation || had.kill_requested || had.reported)
      continue;
    if (had.ready) ReportAlive(had);
    return;
  }
  Worker& w = NewWorker(true, m.spec.argv, m.spec.binary_hash, m.spec.arch,
                        m.spec.options.resources, m.spec.options.runtime_env);
  w.actor = m;
  if (w.kill_requested) {
    FailWorker(w, w.kill_reason);
  } else {
    Assign(w);  // a spare that took it; a new process is assigned when it registers
  }
}

void WorkerPool::Kill(Worker& w, const std::string& reason) {
  if (!w.kill_requested) {
    w.kill_requested = true;
    w.kill_reason = reason;
  }
  if (w.pid > 0) {
    processes_.Kill(w.pid);
    // The head counts a killed worker's resources free at once and may place the next
    // worker on its devices before this one is reaped: they go back now, not at the reap
    // (a new worker that found none free failed at start).
    ReleaseDevices(w);
  }
}

void WorkerPool::OnKillWorker(const proto::KillWorkerMsg& m) {
  Worker* w = !m.actor_id.empty() ? ByActor(m.actor_id) : ByLease(m.lease_id);
  if (w) Kill(*w, m.reason);
}

void WorkerPool::OnWorkerRegister(const proto::WorkerRegisterMsg& m) {
  auto it = workers_.find(UniqueId::FromHex(m.worker_id).Binary());
  if (it == workers_.end()) {
    LOG_WARN("node: unknown worker " + m.worker_id + " registered; telling it to exit");
    outbox_.Send(m.address, MsgType::kExit, proto::PingMsg{});
    return;
  }
  Worker& w = it->second;
  w.address = m.address;
  w.call_address = m.call_address.empty() ? m.address : m.call_address;
  if (w.pid == 0) {
    w.pid = m.pid;
    by_pid_[m.pid] = w.id;
    WatchLogs(w);
  }
  if (w.kill_requested) {
    Kill(w, w.kill_reason);
    return;
  }
  // A spare waits for its assignment; a message now opens the node's connection to it (and
  // its handshake) before a burst needs it. It answers no ping without a reply address.
  if (w.spare) outbox_.Send(w.address, MsgType::kPing, proto::PingMsg{});
  Assign(w);
}

void WorkerPool::Assign(Worker& w) {
  if (w.address.empty() || w.spare) return;
  proto::AssignMsg a;
  a.worker_id = WorkerId(UniqueId::FromBinary(w.id)).Hex();
  a.is_actor = w.is_actor;
  if (w.is_actor) a.actor = w.actor;
  a.node_id = options_.node_id;
  a.head_address = options_.head_address;
  outbox_.Send(w.address, MsgType::kAssign, a);
  // A spare's logs were attributed to no one until now.
  if (w.pid > 0 && logs_) logs_->Describe(w.pid, LogSource(w));
}

void WorkerPool::OnAssignReply(const proto::AssignReplyMsg& m) {
  auto it = workers_.find(UniqueId::FromHex(m.worker_id).Binary());
  if (it == workers_.end()) return;
  Worker& w = it->second;
  if (!m.ok) {
    std::string cause =
        "the creation of the actor failed: " + (m.error_type.empty() ? "" : m.error_type + ": ") +
        m.message;
    if (w.is_actor) {
      ActorDied(w, proto::ErrorKind::kCreationFailed, cause);
    } else if (w.has_lease) {
      LeaseFailed(w.lease, proto::ErrorKind::kError, cause);
      w.has_lease = false;
    }
    Kill(w, cause);
    return;
  }
  w.ready = true;
  if (w.is_actor) {
    ReportAlive(w);
  } else if (w.has_lease) {
    GrantTo(w);
  } else {
    w.idle_since = MonotonicSeconds();
  }
}

void WorkerPool::ReportAlive(const Worker& w) {
  proto::WorkerEventMsg ev;
  ev.actor_id = w.actor.spec.actor_id;
  ev.incarnation = w.actor.incarnation;
  ev.address = w.call_address;
  ev.control_address = w.address;
  ev.pid = w.pid;
  Report(proto::WorkerEventKind::kActorAlive, std::move(ev));
}

void WorkerPool::ActorDied(Worker& w, proto::ErrorKind kind, const std::string& cause) {
  if (w.reported || !w.is_actor) return;
  w.reported = true;
  proto::WorkerEventMsg ev;
  ev.actor_id = w.actor.spec.actor_id;
  ev.incarnation = w.actor.incarnation;
  ev.pid = w.pid;
  ev.error_kind = kind;
  ev.cause = cause;
  Report(proto::WorkerEventKind::kActorDied, std::move(ev));
}

void WorkerPool::OnExited(int pid, const std::string& how) {
  if (logs_) logs_->Finish(pid);
  auto it = by_pid_.find(pid);
  if (it == by_pid_.end()) return;
  std::string id = it->second;
  by_pid_.erase(it);
  auto wit = workers_.find(id);
  if (wit == workers_.end()) return;
  Worker& w = wit->second;
  std::string cause = w.kill_requested
                          ? w.kill_reason
                          : "its worker process (pid " + std::to_string(pid) + ") " + how;
  if (w.is_actor)
    ActorDied(
        w, w.kill_kind == proto::ErrorKind::kNone ? proto::ErrorKind::kActorDiedError : w.kill_kind,
        cause);
  if (w.has_lease)
    LeaseFailed(
        w.lease,
        w.kill_kind == proto::ErrorKind::kNone ? proto::ErrorKind::kWorkerDied : w.kill_kind,
        cause);
  if (objects_) objects_->OnProcessExit(w.address);
  if (!w.address.empty() && !w.spare) {  // a spare ran nothing, so leased nothing
    proto::WorkerEventMsg ev;
    ev.control_address = w.address;
    ev.pid = pid;
    Report(proto::WorkerEventKind::kProcessExited, std::move(ev));
  }
  for (const std::string* a : {&w.address, &w.call_address}) {
    if (!a->empty()) transport::ForgetLocalPeer(*a);
  }
  ForgetHolder(w);
  Erase(id);
}

// The leases `gone` held on this node's workers have no one to answer: their end is still
// reported to the head, but no kLeaseReply goes to a process known to have exited (it would
// wait, undeliverable, in a socket to an address nothing listens on).
void WorkerPool::ForgetHolder(const Worker& gone) {
  if (gone.address.empty()) return;
  for (auto& [id, w] : workers_) {
    if (w.has_lease && (w.lease.reply_to == gone.address || w.lease.reply_to == gone.call_address))
      w.lease.reply_to.clear();
  }
}

void WorkerPool::Report(proto::WorkerEventKind kind, proto::WorkerEventMsg ev) {
  ev.kind = int(kind);
  ev.node_id = options_.node_id;
  ev.node_secret = options_.node_secret;
  events_.Send(std::move(ev), MonotonicSeconds());
}

WorkerPool::Worker* WorkerPool::ByActor(const std::string& actor_id) {
  for (auto& [id, w] : workers_)
    if (w.is_actor && w.actor.spec.actor_id == actor_id) return &w;
  return nullptr;
}

}  // namespace orrery::node
