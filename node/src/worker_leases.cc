// Task leases on the node (node_service.h, docs/protocol.md "Tasks and leases"): a granted
// lease goes to an idle task worker of the same executable or to a new one; its end or its
// worker's death is answered to the lease's holder and reported to the head.
#include "core/internal/clock.h"
#include "node/src/worker_pool.h"

namespace orrery::node {

using proto::MsgType;

void WorkerPool::OnGrantLease(const proto::LeaseRequestMsg& r) {
  // A grant the head sends again (its holder asked again, not having heard): the lease has
  // its worker here already, which answers once more when it is ready (else on its Assign).
  if (Worker* held = ByLease(r.lease_id)) {
    if (held->ready) GrantTo(*held);
    return;
  }
  if (ended_leases_.Contains(r.lease_id))
    return LeaseFailed(r, proto::ErrorKind::kWorkerDied, "the lease ended on this node already");
  bool wants_devices = false;
  for (const char* kind : {"TPU", "GPU", "XPU"})
    wants_devices = wants_devices || r.resources.count(kind);
  const std::string& executable = r.binary_hash;
  for (auto& [id, w] : workers_) {
    // An idle task worker serves another lease only for the same executable and when
    // neither needs devices (a process's visible devices are fixed when it starts), and for
    // the same runtime env (so are its variables and folder).
    if (!w.is_actor && w.ready && !w.has_lease && !w.kill_requested && !wants_devices &&
        w.devices.empty() && w.executable == executable && w.runtime_env == r.runtime_env) {
      w.has_lease = true;
      w.lease = r;
      w.started = MonotonicSeconds();
      GrantTo(w);
      return;
    }
  }
  Worker& w = NewWorker(false, r.argv, r.binary_hash, r.arch, r.resources, r.runtime_env);
  w.has_lease = true;
  w.lease = r;
  if (w.kill_requested) {
    FailWorker(w, w.kill_reason);
  } else {
    Assign(w);  // a spare that took it; a new process is assigned when it registers
  }
}

void WorkerPool::GrantTo(Worker& w) {
  proto::LeaseReplyMsg reply;
  reply.request_id = w.lease.request_id;
  reply.lease_id = w.lease.lease_id;
  reply.ok = true;
  reply.worker_address = w.call_address;
  reply.control_address = w.address;
  reply.worker_id = w.id;
  reply.node_id = options_.node_id;
  if (!w.lease.reply_to.empty()) outbox_.Send(w.lease.reply_to, MsgType::kLeaseReply, reply);
  if (w.pid > 0 && logs_) logs_->Describe(w.pid, LogSource(w));
}

void WorkerPool::LeaseFailed(const proto::LeaseRequestMsg& r, proto::ErrorKind kind,
                             const std::string& message) {
  ended_leases_.Add(r.lease_id);
  proto::LeaseReplyMsg reply;
  reply.request_id = r.request_id;
  reply.lease_id = r.lease_id;
  reply.ok = false;
  reply.error_kind = kind;
  reply.message = message;
  if (!r.reply_to.empty()) outbox_.Send(r.reply_to, MsgType::kLeaseReply, reply);  // ForgetHolder
  proto::WorkerEventMsg ev;
  ev.lease_id = r.lease_id;
  ev.cause = message;
  Report(proto::WorkerEventKind::kLeaseWorkerDied, std::move(ev));
}

void WorkerPool::OnReleaseLease(const std::string& lease_id) {
  ended_leases_.Add(lease_id);
  if (Worker* w = ByLease(lease_id)) {
    w->has_lease = false;
    w->idle_since = MonotonicSeconds();
    if (!w->devices.empty()) Kill(*w, "its lease ended; its devices go back to the node");
  }
}

WorkerPool::Worker* WorkerPool::ByLease(const std::string& lease_id) {
  for (auto& [id, w] : workers_)
    if (w.has_lease && w.lease.lease_id == lease_id) return &w;
  return nullptr;
}

}  // namespace orrery::node
