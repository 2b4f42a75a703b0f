// Stateless tasks (docs/architecture.md "Client runtime", docs/protocol.md "Tasks and
// leases"): tasks that agree on their resource shape and placement share a key; each key
// asks the head for worker leases, sends its queued tasks to the leased workers (a few in
// flight per lease), retries or fails the tasks of a worker that died, and returns leases
// that stay idle.
//
// Thread-safety: every method may be called from any thread; OnReply and OnLeaseReply run
// on the inbox thread. One lock, mu_, held while sending (sends never block).
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/src/arg_resolver.h"
#include "actors/src/head_client.h"
#include "actors/src/object_store.h"
#include "actors/src/submission.h"
#include "core/internal/protocol.h"
#include "core/internal/thread_annotations.h"
#include "orrery/config.h"

namespace orrery::runtime {

class TaskSubmitter {
 public:
  // How often the runtime should tick: fast while a lease is held or requested (to return
  // idle leases promptly), slowly otherwise.
  static constexpr int kLeaseTickMs = 20;
  static constexpr int kIdleTickMs = 1000;
  // A lease request not answered within this long is sent again: one sent as the head
  // stopped is lost with its connection (the head ignores a request it has queued already).
  static constexpr double kLeaseResendS = 1.0;

  // The references outlive the submitter. set_tick_ms: asks the runtime to tick at that
  // period (called under mu_; it must not call back into the submitter).
  TaskSubmitter(const ProcessIdentity& self, const Config& config, Outbox& outbox, HeadClient& head,
                ObjectStore& store, ArgResolver& resolver, std::function<void(int)> set_tick_ms);

  // Queues a task (its return_id set, its arguments in slots) under the key of `options`
  // (already validated, resources defaulted); it is sent once its arguments are resolved
  // and a lease has a free slot.
  void Submit(const internal::CallOptions& options, std::shared_ptr<PendingCall> call)
      EXCLUDES(mu_);
  // Once every `now - idle_since >= task_lease_idle_ms`: returns leases with nothing to do.
  void ReturnIdleLeases(double now) EXCLUDES(mu_);
  // Sends again the lease requests not granted for kLeaseResendS (called with the tick).
  void ResendLeaseRequests(double now) EXCLUDES(mu_);
  // Returns every lease, granted or requested (the process is stopping).
  void ReturnAllLeases() EXCLUDES(mu_);

  // Inbox thread: the leased worker answered a task (the result itself goes to the store).
  void OnReply(const std::string& lease_id, const ObjectId& object) EXCLUDES(mu_);
  void OnLeaseReply(const proto::LeaseReplyMsg& reply) EXCLUDES(mu_);

  // orrery::Cancel of the task whose result is `id`: one still resolving its arguments or
  // queued goes; one sent to a worker is told there (kCancel; with force its worker exits
  // and the other tasks it had are queued again). False when no task of this process has
  // that result; *function: the task's function.
  bool Cancel(const ObjectId& id, bool force, std::string* function) EXCLUDES(mu_);

  // Tasks share leases only when they agree on all of these.
  static std::string KeyOf(const internal::CallOptions& options);

 private:
  struct Lease {
    std::string id;
    std::string key;
    std::string worker_address;             // empty: requested, not granted yet
    std::string control_address;            // the worker's runtime inbox (kCancel)
    std::vector<ObjectId> force_cancelled;  // its worker exits if it runs one (Cancel, force)
    std::unordered_map<ObjectId, std::shared_ptr<PendingCall>, IdHash> inflight;
    double idle_since = 0;
    proto::LeaseRequestMsg request;  // as sent, until granted
    double asked_at = 0;             // when `request` was last sent
  };
  struct TaskKey {
    internal::CallOptions options;
    std::deque<std::shared_ptr<PendingCall>> queue;  // resolved, waiting for a lease slot
    int requested = 0;                               // lease requests in flight
    std::vector<std::string> leases;
    int lost_before_grant = 0;  // lease requests in a row whose node or worker died first
  };

  void Enqueue(const std::string& key, std::shared_ptr<PendingCall> call) EXCLUDES(mu_);
  // Sends queued tasks to the key's leases, then asks for more leases if tasks still wait.
  void Pump(const std::string& key) REQUIRES(mu_);
  void SendToLease(TaskKey& k, Lease& l) REQUIRES(mu_);
  void RequestLease(const std::string& key, TaskKey& k) REQUIRES(mu_);
  void OnRefused(std::map<std::string, Lease>::iterator it, const proto::LeaseReplyMsg& r)
      REQUIRES(mu_);
  void OnWorkerDied(std::map<std::string, Lease>::iterator it, const proto::LeaseReplyMsg& r)
      REQUIRES(mu_);
  void ReturnLease(const std::string& lease_id, bool failed) REQUIRES(mu_);

  const ProcessIdentity& self_;
  const Config& config_;
  Outbox& outbox_;
  HeadClient& head_;
  ObjectStore& store_;
  ArgResolver& resolver_;
  const std::function<void(int)> set_tick_ms_;

  Mutex mu_;
  std::map<std::string, TaskKey> keys_ GUARDED_BY(mu_);
  std::map<std::string, Lease> leases_ GUARDED_BY(mu_);
  // Tasks between Submit and Enqueue (resolving their arguments): Cancel finds them here.
  std::unordered_map<ObjectId, std::weak_ptr<PendingCall>, IdHash> resolving_ GUARDED_BY(mu_);
};

}  // namespace orrery::runtime
