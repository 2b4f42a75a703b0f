// The per-process runtime behind the public API: one in every driver and every worker.
//
// It owns the process's inbox (where replies, actor updates and object fetches arrive), the
// object store, and the submitters that send calls straight to actor and task workers.
// Control requests (create actor, named lookup, placement groups, cluster info) go to the
// head as small RPCs. Thread-safety: every public method may be called from any thread;
// inbox handlers run on the inbox thread.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/src/object_store.h"
#include "core/src/protocol.h"
#include "core/src/thread_annotations.h"
#include "core/src/transport.h"
#include "orrery/api/runtime_api.h"
#include "orrery/config.h"

namespace orrery::runtime {

// A call waiting to be sent: its return object, function and arguments.
struct PendingCall {
  ObjectId return_id;
  std::string function;
  std::vector<internal::ArgSlot> slots;
  std::string args;    // packed msgpack array, once every slot is resolved
  int unresolved = 0;  // dependencies not yet ready
  int retries_left = 0;
  uint64_t seq = 0;
  std::shared_ptr<const ObjectError> dep_error;
};

class Runtime {
 public:
  Runtime(Config config, std::string head_address, JobId job, std::string where);
  ~Runtime();
  Status Start(const std::string& bind_host);
  void Stop();

  const std::string& address() const { return inbox_.address(); }
  const std::string& head_address() const { return head_address_; }
  const Config& config() const { return config_; }
  ObjectStore& store() { return store_; }
  transport::Inbox& inbox() { return inbox_; }
  // Extra handler for messages the runtime does not handle itself (the worker's).
  // A worker's: the SHA-256 of its executable, which the actors and tasks it submits name
  // (a driver's is set by RegisterJob). Call before Start.
  void SetExecutableHash(std::string hash) { binary_hash_ = std::move(hash); }
  void SetExtraHandler(std::function<bool(transport::Envelope&)> handler) {
    extra_ = std::move(handler);
  }

  // ---- the public API's operations (throw orrery::Error subclasses) ----
  std::shared_ptr<internal::RefHolder> SubmitTask(const std::string& function,
                                                  std::vector<internal::ArgSlot> args,
                                                  const internal::CallOptions& options);
  ActorId CreateActor(const std::string& factory, std::vector<internal::ArgSlot> args,
                      const internal::CallOptions& options);
  std::shared_ptr<internal::RefHolder> SubmitActorTask(const ActorId& actor,
                                                       const std::string& method,
                                                       std::vector<internal::ArgSlot> args);
  std::shared_ptr<internal::RefHolder> Put(std::string bytes);
  std::shared_ptr<const std::string> Get(const internal::RefHolder& ref, int timeout_ms);
  std::vector<bool> Wait(const std::vector<const internal::RefHolder*>& refs, int num_returns,
                         int timeout_ms);
  ActorId GetNamedActor(const std::string& name, const std::string& ns);
  void KillActor(const ActorId& actor, bool no_restart);
  proto::PlacementGroupReplyMsg PlacementGroupRpc(proto::MsgType type, proto::PlacementGroupMsg msg,
                                                  int timeout_ms);
  std::vector<proto::NodeInfoMsg> ClusterInfo();
  // Fire-and-forget: the head releases the group's bundles and stops its actors.
  void RemovePlacementGroup(const PlacementGroupId& id);
  // Kills the non-detached actors this process created.
  void KillOwnedActors();
  // Drivers: registers the job with the head (and heartbeats it from the tick); Shutdown
  // ends it, waiting up to timeout_ms for the head to acknowledge (docs/protocol.md "Ending
  // a job").
  void RegisterJob();
  void EndJob(int timeout_ms = 1000);
  // Asks the head to keep a driver-written record (and a stream entry) in the state store
  // (proto::RecordMsg). Unavailable when the head did not answer within timeout_ms.
  Status PutRecord(const proto::RecordMsg& record, int timeout_ms = 5000);

 private:
  struct ActorState {
    Mutex mu;
    proto::ActorState state GUARDED_BY(mu) = proto::ActorState::kPending;
    std::string address GUARDED_BY(mu);
    int incarnation GUARDED_BY(mu) = -1;
    // Kill(no_restart=false): ignore this one's updates.
    int killed_incarnation GUARDED_BY(mu) = -1;
    uint64_t next_seq GUARDED_BY(mu) = 0;
    int max_task_retries GUARDED_BY(mu) = 0;
    bool subscribed GUARDED_BY(mu) = false;
    bool owned GUARDED_BY(mu) = false;
    bool detached GUARDED_BY(mu) = false;
    // Submission order, not yet sent.
    std::deque<std::shared_ptr<PendingCall>> queue GUARDED_BY(mu);
    std::map<uint64_t, std::shared_ptr<PendingCall>> inflight GUARDED_BY(mu);  // sent, by seq
    ObjectError death GUARDED_BY(mu);
  };
  struct Lease {
    std::string id;
    std::string key;
    std::string worker_address;
    std::unordered_map<ObjectId, std::shared_ptr<PendingCall>, IdHash> inflight;
    double idle_since = 0;
  };
  struct TaskKey {
    internal::CallOptions options;
    std::deque<std::shared_ptr<PendingCall>> queue;  // resolved, waiting for a lease slot
    int requested = 0;                               // lease requests in flight
    std::vector<std::string> leases;
    int lost_before_grant = 0;  // lease requests in a row whose node or worker died first
  };

  void Handle(transport::Envelope& env) EXCLUDES(actors_mu_, tasks_mu_, rpc_mu_);
  void OnCallReply(transport::Envelope& env);
  void OnActorUpdate(const proto::ActorUpdateMsg& update);
  void OnLeaseReply(const proto::LeaseReplyMsg& reply);
  void OnGetObject(const proto::GetObjectMsg& msg);
  void OnObjectReply(transport::Envelope& env);
  void Tick() EXCLUDES(tasks_mu_);

  std::shared_ptr<internal::RefHolder> NewReturn(ObjectId* id);
  // Resolves the call's ObjectRef arguments, then runs `ready` (possibly on another thread).
  void Resolve(const std::shared_ptr<PendingCall>& call, std::function<void()> ready);
  void EnsureFetch(const internal::RefHolder& ref);
  static std::string PackArgs(const std::vector<internal::ArgSlot>& slots);

  std::shared_ptr<ActorState> ActorFor(const ActorId& id, bool subscribe) EXCLUDES(actors_mu_);
  // Null for an actor this process has no state for (messages from peers never add one).
  std::shared_ptr<ActorState> FindActor(const ActorId& id) EXCLUDES(actors_mu_);
  void DispatchActor(const ActorId& id, ActorState& a) REQUIRES(a.mu);
  void FailCall(const PendingCall& call, const ObjectError& error);

  void EnqueueTask(const std::string& key, std::shared_ptr<PendingCall> call) EXCLUDES(tasks_mu_);
  void PumpTasks(const std::string& key) REQUIRES(tasks_mu_);
  void ReturnLease(const std::string& lease_id, bool failed) REQUIRES(tasks_mu_);

  // Synchronous control RPC to the head: sends, then waits for the reply with request_id.
  template <typename Reply, typename Meta>
  Reply Rpc(proto::MsgType type, Meta meta, proto::MsgType reply_type, int timeout_ms = 30000)
      EXCLUDES(rpc_mu_);
  template <typename Reply, typename Meta>
  Reply RpcWithPayload(proto::MsgType type, Meta meta, const std::string& payload,
                       proto::MsgType reply_type, int timeout_ms = 120000, bool has_payload = true)
      EXCLUDES(rpc_mu_);
  void CompleteRpc(uint64_t request_id, transport::Envelope& env) EXCLUDES(rpc_mu_);

  Config config_;
  std::string head_address_;
  JobId job_;
  std::string where_;
  std::vector<std::string> argv_;  // what workers of this process's actors and tasks run
  std::string binary_hash_;        // cluster mode: content hash of argv_[0]
  std::string arch_;
  transport::Inbox inbox_;
  ObjectStore store_;
  std::function<bool(transport::Envelope&)> extra_;
  // Request ids start at a random point per process, so that a reply meant for an earlier
  // process on the same address never matches a request of this one.
  std::atomic<uint64_t> next_request_{proto::RequestIdBase()};
  std::atomic<bool> job_registered_{false};
  double last_job_heartbeat_ = 0;  // only Tick, on the inbox thread: no lock

  // Taken before an ActorState's mu where both are held (KillOwnedActors).
  Mutex actors_mu_;
  std::unordered_map<ActorId, std::shared_ptr<ActorState>, IdHash> actors_ GUARDED_BY(actors_mu_);

  Mutex tasks_mu_;
  std::map<std::string, TaskKey> task_keys_ GUARDED_BY(tasks_mu_);
  std::map<std::string, Lease> leases_ GUARDED_BY(tasks_mu_);

  Mutex rpc_mu_;
  CondVar rpc_cv_;
  // Null: waiting.
  std::map<uint64_t, std::shared_ptr<transport::Envelope>> rpc_replies_ GUARDED_BY(rpc_mu_);
};

// A worker process may hold 1, 2, 4 or 8 TPU chips (TPU.md): anything else is refused with
// ConfigError (naming `what`) before it is scheduled.
void CheckTpuAmount(const Resources& r, const std::string& what);

// This process's command line, argv[0] replaced by the absolute path of its executable.
std::vector<std::string> SelfCommandLine();

// The runtime of this process, or null before Init / after Shutdown.
Runtime* Current();
void SetCurrent(Runtime* runtime);

}  // namespace orrery::runtime
