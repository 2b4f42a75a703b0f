// The runtime's stateless tasks (runtime.h): leases per resource shape, tasks sent to leased
// workers, leases returned when idle (docs/protocol.md "Tasks and leases").
#include <algorithm>

#include "actors/src/runtime.h"
#include "core/src/clock.h"
#include "core/src/log.h"
#include "orrery/errors.h"
#include "orrery/resources.h"

namespace orrery::runtime {

using proto::MsgType;

namespace {
constexpr size_t kMaxTasksInFlightPerLease = 8;
constexpr int kMaxLeaseRequestsPerKey = 4;
constexpr int kLeaseTickMs = 20;
// A lease whose node or worker died before it was granted is asked for again, this many
// times in a row at most (a worker that dies as it starts would otherwise loop forever).
constexpr int kMaxLostLeasesInARow = 16;
constexpr const char* kWorkerDiedKind = "WorkerDied";
}  // namespace

std::shared_ptr<internal::RefHolder> Runtime::SubmitTask(const std::string& function,
                                                         std::vector<internal::ArgSlot> args,
                                                         const internal::CallOptions& options) {
  internal::CallOptions o = options;
  if (!o.resources_set) o.resources = {{"CPU", 1}};
  Status s = ValidateResources(o.resources);
  if (!s.ok()) throw ConfigError("task " + function + ": " + s.message());
  CheckTpuAmount(o.resources, "task " + function);
  if (o.bundle_index >= 0 && o.placement_group.IsNil()) {
    throw ConfigError("task " + function + ": a bundle index needs a placement group");
  }
  // Tasks share leases only when they agree on all of these (max_retries too: a node's memory
  // monitor kills the workers of retried tasks first).
  std::string key = internal::Pack(
      std::make_tuple(o.resources, o.label_selector, o.placement_group.Binary(), o.bundle_index,
                      o.strategy, o.affinity_node.Binary(), o.affinity_soft, o.max_retries));
  {
    MutexLock lock(&tasks_mu_);
    auto& k = task_keys_[key];
    k.options = o;
  }
  auto call = std::make_shared<PendingCall>();
  auto ref = NewReturn(&call->return_id);
  call->function = function;
  call->slots = std::move(args);
  call->retries_left = o.max_retries;
  Resolve(call, [this, key, call] { EnqueueTask(key, call); });
  return ref;
}

void Runtime::EnqueueTask(const std::string& key, std::shared_ptr<PendingCall> call) {
  if (call->dep_error) {
    FailCall(*call, *call->dep_error);
    return;
  }
  MutexLock lock(&tasks_mu_);
  task_keys_[key].queue.push_back(std::move(call));
  PumpTasks(key);
}

void Runtime::PumpTasks(const std::string& key) {
  TaskKey& k = task_keys_[key];
  for (const auto& lease_id : k.leases) {
    auto it = leases_.find(lease_id);
    if (it == leases_.end()) continue;
    Lease& l = it->second;
    while (l.inflight.size() < kMaxTasksInFlightPerLease && !k.queue.empty()) {
      auto call = k.queue.front();
      k.queue.pop_front();
      proto::CallMsg m;
      m.object_id = call->return_id.Binary();
      m.reply_to = address();
      m.function = call->function;
      m.lease_id = l.id;
      LOG_DEBUG("task " + call->function + " " + call->return_id.Hex().substr(0, 8) + " -> " +
                l.worker_address);
      Status sent = transport::TrySend(l.worker_address, MsgType::kCall, m, &call->args);
      if (!sent.ok()) {
        FailCall(*call,
                 ObjectError{"Error", "",
                             "the task " + call->function + " was not sent: " + sent.message(),
                             call->function, ""});
        continue;
      }
      l.inflight[call->return_id] = call;
    }
  }
  if (k.queue.empty()) return;
  int want = int(std::min<size_t>(
      kMaxLeaseRequestsPerKey,
      (k.queue.size() + kMaxTasksInFlightPerLease - 1) / kMaxTasksInFlightPerLease));
  while (k.requested < want) {
    proto::LeaseRequestMsg r;
    r.request_id = next_request_++;
    r.lease_id = UniqueId::Random().Binary();
    r.reply_to = address();
    r.resources = k.options.resources;
    r.label_selector = k.options.label_selector;
    r.placement_group =
        k.options.placement_group.IsNil() ? std::string() : k.options.placement_group.Binary();
    r.bundle_index = k.options.bundle_index;
    r.infeasible_timeout_s = config_.infeasible_timeout_s;
    r.job_id = job_.Binary();
    r.argv = argv_;
    r.binary_hash = binary_hash_;
    r.arch = arch_;
    r.strategy = k.options.strategy;
    r.affinity_node =
        k.options.affinity_node.IsNil() ? std::string() : k.options.affinity_node.Binary();
    r.affinity_soft = k.options.affinity_soft;
    r.max_retries = k.options.max_retries;
    inbox_.SetTickPeriod(kLeaseTickMs);
    Lease& l = leases_[r.lease_id];
    l.id = r.lease_id;
    l.key = key;
    ++k.requested;
    transport::Send(head_address_, MsgType::kRequestLease, r);
  }
}

void Runtime::OnLeaseReply(const proto::LeaseReplyMsg& r) {
  MutexLock lock(&tasks_mu_);
  auto it = leases_.find(r.lease_id);
  if (it == leases_.end()) {
    // A grant for a lease this process no longer wants: give it straight back.
    if (r.ok)
      transport::Send(head_address_, MsgType::kReturnLease,
                      proto::ReturnLeaseMsg{r.lease_id, false});
    return;
  }
  Lease& l = it->second;
  TaskKey& k = task_keys_[l.key];
  std::string key = l.key;
  bool granted = !l.worker_address.empty();
  LOG_DEBUG("lease " + UniqueId::FromBinary(r.lease_id).Hex().substr(0, 8) +
            (r.ok ? " granted " + r.worker_address : " failed: " + r.message));
  if (r.ok) {
    if (granted) return;
    --k.requested;
    k.lost_before_grant = 0;
    l.worker_address = r.worker_address;
    l.idle_since = MonotonicSeconds();
    k.leases.push_back(l.id);
    PumpTasks(key);
    return;
  }
  if (!granted) {
    --k.requested;
    leases_.erase(it);
    if (r.error_kind == kWorkerDiedKind && ++k.lost_before_grant <= kMaxLostLeasesInARow) {
      // The node chosen for the lease (or the worker it started) died before the grant
      // reached us: nothing ran, so ask again rather than fail the queued calls.
      PumpTasks(key);
      return;
    }
    // The request failed (infeasible): nothing of this shape can run.
    if (k.requested == 0 && k.leases.empty()) {
      std::string kind = r.error_kind == kWorkerDiedKind ? "WorkerCrashedError" : r.error_kind;
      for (auto& call : k.queue)
        FailCall(*call, ObjectError{kind, "", r.message, call->function, ""});
      k.queue.clear();
    }
    return;
  }
  // The leased worker died: retry its calls or fail them. A node's memory monitor kills
  // with OutOfMemoryError, whose message says why.
  bool oom = r.error_kind == "OutOfMemoryError";
  for (auto& [id, call] : l.inflight) {
    if (call->retries_left != 0) {
      if (call->retries_left > 0) --call->retries_left;
      k.queue.push_front(call);
    } else {
      FailCall(*call, ObjectError{
                          oom ? r.error_kind : "WorkerCrashedError", "",
                          oom ? "task " + call->function + " failed: " + r.message
                              : "the worker running task " + call->function + " died: " + r.message,
                          call->function, ""});
    }
  }
  l.inflight.clear();
  k.leases.erase(std::remove(k.leases.begin(), k.leases.end(), r.lease_id), k.leases.end());
  leases_.erase(it);
  PumpTasks(key);
}

void Runtime::ReturnLease(const std::string& lease_id, bool failed) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  auto& k = task_keys_[it->second.key];
  k.leases.erase(std::remove(k.leases.begin(), k.leases.end(), lease_id), k.leases.end());
  transport::Send(head_address_, MsgType::kReturnLease, proto::ReturnLeaseMsg{lease_id, failed});
  leases_.erase(it);
}

}  // namespace orrery::runtime
