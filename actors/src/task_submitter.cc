#include "actors/src/task_submitter.h"

#include <algorithm>
#include <tuple>

#include "core/internal/clock.h"
#include "core/internal/log.h"
#include "core/internal/runtime_env.h"

namespace orrery::runtime {

using proto::MsgType;

namespace {
constexpr size_t kMaxTasksInFlightPerLease = 8;
constexpr int kMaxLeaseRequestsPerKey = 4;
// A lease whose node or worker died before it was granted is asked for again, this many
// times in a row at most (a worker that dies as it starts would otherwise loop forever).
constexpr int kMaxLostLeasesInARow = 16;
constexpr proto::ErrorKind kWorkerDiedKind = proto::ErrorKind::kWorkerDied;
}  // namespace

TaskSubmitter::TaskSubmitter(const ProcessIdentity& self, const Config& config, Outbox& outbox,
                             HeadClient& head, ObjectStore& store, ArgResolver& resolver,
                             std::function<void(int)> set_tick_ms)
    : self_(self),
      config_(config),
      outbox_(outbox),
      head_(head),
      store_(store),
      resolver_(resolver),
      set_tick_ms_(std::move(set_tick_ms)) {}

std::string TaskSubmitter::KeyOf(const internal::CallOptions& o) {
  // max_retries too: a node's memory monitor kills the workers of retried tasks first.
  return internal::Pack(std::make_tuple(o.resources, o.label_selector, o.placement_group.Binary(),
                                        o.bundle_index, o.strategy, o.affinity_node.Binary(),
                                        o.affinity_soft, o.max_retries, o.runtime_env.env_vars,
                                        o.runtime_env.working_dir, o.working_dir_hash));
}

void TaskSubmitter::Submit(const internal::CallOptions& options,
                           std::shared_ptr<PendingCall> call) {
  self_.submitted.fetch_add(1, std::memory_order_relaxed);
  std::string key = KeyOf(options);
  {
    MutexLock lock(&mu_);
    keys_[key].options = options;
    resolving_[call->return_id] = call;
  }
  call->retries_left = options.max_retries;
  resolver_.Resolve(call, [this, key, call] { Enqueue(key, call); });
}

void TaskSubmitter::Enqueue(const std::string& key, std::shared_ptr<PendingCall> call) {
  ObjectStore::DeferCallbacks defer;  // failed calls complete after the lock is released
  // One lock from resolving_ to the queue: a Cancel finds the call in one or the other.
  MutexLock lock(&mu_);
  resolving_.erase(call->return_id);
  if (call->cancelled) return;  // its result is TaskCancelledError already
  if (call->dep_error) {
    FailCall(store_, *call, *call->dep_error);
    return;
  }
  keys_[key].queue.push_back(std::move(call));
  Pump(key);
}

void TaskSubmitter::Pump(const std::string& key) {
  TaskKey& k = keys_[key];
  for (const auto& lease_id : k.leases) {
    auto it = leases_.find(lease_id);
    if (it != leases_.end()) SendToLease(k, it->second);
  }
  if (k.queue.empty()) return;
  int want = int(std::min<size_t>(
      kMaxLeaseRequestsPerKey,
      (k.queue.size() + kMaxTasksInFlightPerLease - 1) / kMaxTasksInFlightPerLease));
  while (k.requested < want) RequestLease(key, k);
}

void TaskSubmitter::SendToLease(TaskKey& k, Lease& l) {
  while (l.inflight.size() < kMaxTasksInFlightPerLease && !k.queue.empty()) {
    auto call = k.queue.front();
    k.queue.pop_front();
    if (call->cancelled) continue;
    proto::CallMsg m;
    m.object_id = call->return_id.Binary();
    m.reply_to = self_.address;
    m.function = call->function;
    m.lease_id = l.id;
    LOG_DEBUG("task " + call->function + " " + call->return_id.Hex().substr(0, 8) + " -> " +
              l.worker_address);
    Status sent = outbox_.TrySendUnordered(l.worker_address, MsgType::kCall, m, &call->args);
    if (!sent.ok()) {
      FailCall(store_, *call,
               ObjectError{proto::ErrorKind::kError, "",
                           "the task " + call->function + " was not sent: " + sent.message(),
                           call->function, ""});
      continue;
    }
    l.inflight[call->return_id] = call;
  }
}

void TaskSubmitter::RequestLease(const std::string& key, TaskKey& k) {
  const internal::CallOptions& o = k.options;
  proto::LeaseRequestMsg r;
  r.request_id = head_.NextRequestId();
  r.lease_id = UniqueId::Random().Binary();
  r.reply_to = self_.address;
  r.resources = o.resources;
  r.label_selector = o.label_selector;
  r.placement_group = o.placement_group.IsNil() ? std::string() : o.placement_group.Binary();
  r.bundle_index = o.bundle_index;
  r.infeasible_timeout_s = config_.infeasible_timeout_s;
  r.job_id = self_.job.Binary();
  r.argv = self_.argv;
  r.binary_hash = self_.binary_hash;
  r.arch = self_.arch;
  r.strategy = o.strategy;
  r.affinity_node = o.affinity_node.IsNil() ? std::string() : o.affinity_node.Binary();
  r.affinity_soft = o.affinity_soft;
  r.max_retries = o.max_retries;
  r.runtime_env = runtime_env::MsgOf(o.runtime_env, o.working_dir_hash, o.working_dir_id);
  set_tick_ms_(kLeaseTickMs);
  Lease& l = leases_[r.lease_id];
  l.id = r.lease_id;
  l.key = key;
  l.asked_at = MonotonicSeconds();
  ++k.requested;
  head_.RequestLease(r);
  l.request = std::move(r);
}

void TaskSubmitter::ResendLeaseRequests(double now) {
  MutexLock lock(&mu_);
  for (auto& [id, l] : leases_) {
    if (!l.worker_address.empty() || now - l.asked_at < kLeaseResendS) continue;
    l.asked_at = now;
    head_.RequestLease(l.request);
  }
}

void TaskSubmitter::OnReply(const std::string& lease_id, const ObjectId& object) {
  MutexLock lock(&mu_);
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  Lease& l = it->second;
  l.inflight.erase(object);
  Pump(l.key);
  if (l.inflight.empty()) l.idle_since = MonotonicSeconds();
}

void TaskSubmitter::OnLeaseReply(const proto::LeaseReplyMsg& r) {
  ObjectStore::DeferCallbacks defer;  // failed calls complete after the lock is released
  MutexLock lock(&mu_);
  auto it = leases_.find(r.lease_id);
  if (it == leases_.end()) {
    // A grant for a lease this process no longer wants: give it straight back.
    if (r.ok) head_.ReturnLease(r.lease_id, false);
    return;
  }
  Lease& l = it->second;
  TaskKey& k = keys_[l.key];
  bool granted = !l.worker_address.empty();
  LOG_DEBUG("lease " + UniqueId::FromBinary(r.lease_id).Hex().substr(0, 8) +
            (r.ok ? " granted " + r.worker_address : " failed: " + r.message));
  if (r.ok) {
    if (granted) return;
    --k.requested;
    k.lost_before_grant = 0;
    l.worker_address = r.worker_address;
    l.control_address = r.control_address;
    l.request = {};
    l.idle_since = MonotonicSeconds();
    k.leases.push_back(l.id);
    Pump(l.key);
    return;
  }
  if (!granted) return OnRefused(it, r);
  OnWorkerDied(it, r);
}

void TaskSubmitter::OnRefused(std::map<std::string, Lease>::iterator it,
                              const proto::LeaseReplyMsg& r) {
  std::string key = it->second.key;
  TaskKey& k = keys_[key];
  --k.requested;
  leases_.erase(it);
  if (r.error_kind == kWorkerDiedKind && ++k.lost_before_grant <= kMaxLostLeasesInARow) {
    // The node chosen for the lease (or the worker it started) died before the grant
    // reached us: nothing ran, so ask again rather than fail the queued calls.
    Pump(key);
    return;
  }
  // The request failed (infeasible): nothing of this shape can run.
  if (k.requested == 0 && k.leases.empty()) {
    proto::ErrorKind kind =
        r.error_kind == kWorkerDiedKind ? proto::ErrorKind::kWorkerCrashedError : r.error_kind;
    for (auto& call : k.queue)
      FailCall(store_, *call, ObjectError{kind, "", r.message, call->function, ""});
    k.queue.clear();
  }
}

void TaskSubmitter::OnWorkerDied(std::map<std::string, Lease>::iterator it,
                                 const proto::LeaseReplyMsg& r) {
  // The leased worker died: retry its calls or fail them. A node's memory monitor kills
  // with OutOfMemoryError, whose message says why.
  std::string key = it->second.key;
  TaskKey& k = keys_[key];
  bool oom = r.error_kind == proto::ErrorKind::kOutOfMemoryError;
  // Killed for a forced Cancel only while it still had such a task (else it died itself).
  bool forced = false;
  for (const auto& id : it->second.force_cancelled)
    forced = forced || it->second.inflight.count(id);
  for (auto& [id, call] : it->second.inflight) {
    if (call->cancelled) continue;  // its result is TaskCancelledError already
    if (forced) {
      k.queue.push_front(call);  // its worker exited for another task's Cancel: not a failure
      continue;
    }
    if (call->retries_left != 0) {
      if (call->retries_left > 0) --call->retries_left;
      k.queue.push_front(call);
    } else {
      FailCall(
          store_, *call,
          ObjectError{oom ? r.error_kind : proto::ErrorKind::kWorkerCrashedError, "",
                      oom ? "task " + call->function + " failed: " + r.message
                          : "the worker running task " + call->function + " died: " + r.message,
                      call->function, ""});
    }
  }
  k.leases.erase(std::remove(k.leases.begin(), k.leases.end(), r.lease_id), k.leases.end());
  leases_.erase(it);
  Pump(key);
}

bool TaskSubmitter::Cancel(const ObjectId& id, bool force, std::string* function) {
  MutexLock lock(&mu_);
  auto resolving = resolving_.find(id);
  if (resolving != resolving_.end()) {
    std::shared_ptr<PendingCall> call = resolving->second.lock();
    resolving_.erase(resolving);
    if (call) {
      call->cancelled = true;  // Enqueue drops it
      *function = call->function;
      return true;
    }
  }
  for (auto& [key, k] : keys_) {
    for (auto it = k.queue.begin(); it != k.queue.end(); ++it) {
      if ((*it)->return_id != id) continue;
      (*it)->cancelled = true;
      *function = (*it)->function;
      k.queue.erase(it);
      return true;
    }
  }
  for (auto& [lease_id, l] : leases_) {
    auto it = l.inflight.find(id);
    if (it == l.inflight.end()) continue;
    it->second->cancelled = true;
    *function = it->second->function;
    if (force) l.force_cancelled.push_back(id);
    // Its reply (TaskCancelledError, or the result when it had finished) still ends it here.
    outbox_.Send(l.control_address.empty() ? l.worker_address : l.control_address, MsgType::kCancel,
                 proto::CancelMsg{id.Binary(), force});
    return true;
  }
  return false;
}

void TaskSubmitter::ReturnIdleLeases(double now) {
  ObjectStore::DeferCallbacks defer;  // failed calls complete after the lock is released
  MutexLock lock(&mu_);
  double idle = config_.task_lease_idle_ms / 1000.0;
  std::vector<std::string> expired;
  for (auto& [id, l] : leases_) {
    if (l.worker_address.empty()) continue;  // requested, not granted yet
    if (l.inflight.empty() && keys_[l.key].queue.empty() && now - l.idle_since >= idle)
      expired.push_back(id);
  }
  for (const auto& id : expired) ReturnLease(id, false);
  if (leases_.empty()) set_tick_ms_(kIdleTickMs);
}

void TaskSubmitter::ReturnAllLeases() {
  ObjectStore::DeferCallbacks defer;  // failed calls complete after the lock is released
  // Leases (granted or still requested) go back to the head, so their resources do not
  // stay reserved for a driver that is gone.
  MutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (const auto& [id, l] : leases_) ids.push_back(id);
  for (const auto& id : ids) ReturnLease(id, false);
}

void TaskSubmitter::ReturnLease(const std::string& lease_id, bool failed) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  auto& k = keys_[it->second.key];
  k.leases.erase(std::remove(k.leases.begin(), k.leases.end(), lease_id), k.leases.end());
  head_.ReturnLease(lease_id, failed);
  leases_.erase(it);
}

}  // namespace orrery::runtime
