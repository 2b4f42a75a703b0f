// The per-process runtime behind the public API: one in every driver and every worker
// (docs/architecture.md "Client runtime").
//
// A thin composition: the Runtime owns the process's inbox (where replies, actor updates and
// object fetches arrive) and the object store, dispatches each inbox message to the piece
// that owns it, and implements the public API's operations on top of its pieces:
//   HeadClient       control RPCs to the head (resent until answered) and notifications
//   ActorSubmitter   actor calls: per-actor queues, ordering, resend on restart, updates
//   TaskSubmitter    tasks and the worker leases they run on
//   JobRegistration  a driver's job: registration, executable upload, heartbeat, end
//   ArgResolver      a call's ObjectRef arguments, fetched and packed before it is sent
// Thread-safety: every public method may be called from any thread; inbox handlers run on
// the inbox thread. Each piece owns its state and its locks. One path crosses pieces: a
// submitter fails a call under its own lock, and completing that result in the store runs
// the callbacks of calls waiting for it, which may take another submitter's lock (as in the
// single-class runtime this replaced; see docs/architecture.md "Client runtime").
#pragma once

#include <atomic>
#include <coroutine>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "actors/src/actor_submitter.h"
#include "actors/src/arg_resolver.h"
#include "actors/src/async_waits.h"
#include "actors/src/head_client.h"
#include "actors/src/job_registration.h"
#include "actors/src/object_store.h"
#include "actors/src/streams.h"
#include "actors/src/submission.h"
#include "actors/src/task_submitter.h"
#include "actors/src/task_table.h"
#include "actors/src/working_dirs.h"
#include "core/internal/kept_memory.h"
#include "core/internal/peer_watch.h"
#include "core/internal/protocol.h"
#include "core/internal/recent_ids.h"
#include "core/internal/transport.h"
#include "objects/internal/object_client.h"
#include "orrery/api/runtime_api.h"
#include "orrery/config.h"

namespace orrery::runtime {

using objects::MappedObject;
using objects::ObjectClient;
using objects::ObjectRegion;

// $ORRERY_ADVERTISE_ADDRESS: the host a driver or worker names its endpoints by when that is
// not what it binds ($ORRERY_NODE_IP, say 0.0.0.0 in a pod). A node started with
// --advertise-address sets it for its workers. "" when unset; InvalidArgument naming the
// variable when it is not a host peers can dial (core/internal/text.h).
Result<std::string> AdvertiseAddressFromEnv();

class Runtime {
 public:
  Runtime(Config config, std::string head_address, JobId job, std::string where);
  ~Runtime();
  // Binds this process's inbox on `bind_host`, advertised as `advertise_host` when set (else
  // as bind_host; a wildcard as 127.0.0.1).
  Status Start(const std::string& bind_host, const std::string& advertise_host = "");
  void Stop();

  const std::string& address() const { return inbox_.address(); }
  // Tasks and actor calls this process submitted so far (docs/metrics.md).
  uint64_t submitted() const { return self_.submitted.load(std::memory_order_relaxed); }
  const std::string& head_address() const { return head_.head_address(); }
  const Config& config() const { return config_; }
  ObjectStore& store() { return store_; }
  transport::Inbox& inbox() { return inbox_; }
  // A worker's: the SHA-256 of its executable, which the actors and tasks it submits name
  // (a driver's is set by RegisterJob). Call before Start.
  void SetExecutableHash(std::string hash) { self_.binary_hash = std::move(hash); }
  // Extra handler for messages the runtime does not handle itself (the worker's): what became
  // of the message, or nullopt for a type it does not take either.
  void SetExtraHandler(std::function<std::optional<Status>(transport::Envelope&)> handler) {
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
  // A new object written in place into the node's store (internal::CreateObject).
  std::shared_ptr<internal::RefHolder> CreateObject(size_t size, char** data);
  void SealObject(const internal::RefHolder& ref);
  // A call's result written in place into the node's store (internal::BeginStoredResult):
  // only on a thread running a call (a ScopedCallResult is alive).
  bool BeginStoredResult(size_t size, char** data);
  void EndStoredResult();
  void AbandonStoredResult();
  void AbandonObject(const internal::RefHolder& ref);
  internal::BytesView Get(const internal::RefHolder& ref, int timeout_ms);
  // The bytes of a value kept in a node's store: read in place from this node's store (pulled
  // here first when elsewhere), or, with no store on this host, pulled into this process.
  // Throws ObjectLostError when no copy can be read, GetTimeoutError past timeout_ms.
  internal::BytesView ReadStored(const ObjectId& id, const proto::ObjectLocationMsg& location,
                                 int timeout_ms);
  ObjectClient& objects() { return *objects_; }
  std::vector<bool> Wait(const std::vector<const internal::RefHolder*>& refs, int num_returns,
                         int timeout_ms);
  ActorId GetNamedActor(const std::string& name, const std::string& ns);
  void KillActor(const ActorId& actor, bool no_restart);
  proto::PlacementGroupReplyMsg PlacementGroupRpc(proto::MsgType type, proto::PlacementGroupMsg msg,
                                                  int timeout_ms);
  std::vector<proto::NodeInfoMsg> ClusterInfo();
  // The node groups of a running autoscaler (empty without one): nodes that may still come.
  std::vector<proto::AutoscalerGroupMsg> AutoscalerGroups();
  // Fire-and-forget: the head releases the group's bundles and stops its actors.
  void RemovePlacementGroup(const PlacementGroupId& id);
  // Kills the non-detached actors this process created.
  void KillOwnedActors();
  // Drivers: registers the job with the head (and heartbeats it from the tick); Shutdown
  // ends it, waiting up to timeout_ms for the head to acknowledge (docs/protocol.md "Ending
  // a job").
  void RegisterJob();
  void EndJob(int timeout_ms = 1000);
  // orrery::Cancel: the caller's side (docs/api.md "Cancellation"). Throws orrery::Error.
  void Cancel(const internal::RefHolder& ref, bool force);
  // The worker's side: a call starts only when not cancelled (false: answer it with
  // kTaskCancelledError instead); a running call polls IsCallCancelled. An actor's worker
  // refuses force (it would kill the actor).
  bool BeginCall(const ObjectId& id) EXCLUDES(cancel_mu_);
  void EndCall(const ObjectId& id) EXCLUDES(cancel_mu_);
  bool IsCallCancelled(const ObjectId& id) EXCLUDES(cancel_mu_);
  void SetActorWorker() { actor_worker_ = true; }
  // An actor's worker (docs/api.md "Actors", "Async actors"): a call that no other call of
  // the actor can run beside while it waits (`runs_its_call` says whether the calling thread
  // runs one: a max_concurrency 1 actor's, or an async call) and that waits in Get or Wait
  // on the result of a call to that same actor, neither answered nor running on a thread of
  // its own, would wait forever, so Get and Wait throw instead. Call once, before the
  // actor's first call.
  void SetOwnActor(const ActorId& actor, bool (*runs_its_call)());
  // The worker of such an actor answered the call whose result is `id`, or runs it on a
  // thread of its own (where it needs the call loop no more): a wait on it is no deadlock.
  void NoteCallFreed(const ObjectId& id) EXCLUDES(cancel_mu_);
  // kCancel, from the runtime's inbox (or a worker's call inbox). Throws on a malformed one.
  void OnCancel(const proto::CancelMsg& msg) EXCLUDES(cancel_mu_);
  // Workers' log lines the head passed on: printed with their source when
  // Config::log_to_driver (runtime_logs.cc; docs/logs.md).
  void PrintLogs(const proto::LogBatchMsg& batch) const;

  // Streaming calls (runtime_streams.cc): the caller's side (internal::OpenStream, ...) and
  // the worker's (internal::EmitStreamItem).
  std::shared_ptr<internal::StreamReader> OpenStream(std::shared_ptr<internal::RefHolder> call)
      EXCLUDES(streams_mu_);
  std::shared_ptr<internal::RefHolder> NextStreamItem(internal::StreamReader& reader,
                                                      int64_t timeout_ms);
  // The last generator of the stream is gone: its unread values go, and a producer still
  // running is told to stop.
  void CloseStream(StreamState& s) EXCLUDES(streams_mu_);
  void EmitStreamItem(const std::function<std::string()>& pack) EXCLUDES(streams_mu_);

  // Async calls (runtime_async.cc, docs/api.md "Async actors"). A worker of an actor with
  // async methods sets the poster (which runs work on the actor's call loop) before its
  // first call.
  void SetAsyncPoster(std::function<void(std::function<void()>)> post);
  // internal::SuspendUntilReady: the running async call's coroutine `h` resumes on the call
  // loop once num_returns of refs are ready, at timeout_ms, or when the call is cancelled.
  // Throws orrery::Error outside an async call.
  void SuspendUntilReady(std::vector<std::shared_ptr<internal::RefHolder>> refs, int num_returns,
                         int timeout_ms, std::coroutine_handle<> h) EXCLUDES(async_mu_);
  void ThrowIfAsyncCallCancelled();
  bool RefReady(const internal::RefHolder& ref);
  // The call was cancelled: its waits resume now. / It ended: its waits are forgotten.
  void WakeAsyncWaits(const ObjectId& call) EXCLUDES(async_mu_);
  void EndAsyncWaits(const ObjectId& call) EXCLUDES(async_mu_);

  // Asks the head to keep a driver-written record (and a stream entry) in the state store
  // (proto::RecordMsg). Unavailable when the head did not answer within timeout_ms.
  Status PutRecord(const proto::RecordMsg& record, int timeout_ms = 5000);

 private:
  // The runtime env a task or actor gets (the job's default when it sets none): checked
  // (ConfigError naming `what`), its working_dir made absolute and required to be a folder
  // here, and in a cluster shipped to the head (o.working_dir_hash, o.working_dir_id).
  void CheckRuntimeEnv(internal::CallOptions& o, const std::string& what);
  Status Handle(transport::Envelope& env);
  Status OnCallReply(transport::Envelope& env);
  void OnListTasks(const proto::ListTasksMsg& msg);
  void OnGetObject(const proto::GetObjectMsg& msg);
  Status OnObjectReply(transport::Envelope& env);
  void OnBorrow(const proto::BorrowMsg& msg);
  // The refs a call's result contains (ReplyMsg::contained): kept with the result.
  void KeepReplyRefs(const ObjectId& result, const std::vector<proto::ContainedRefMsg>& refs);
  void Tick();
  void WatchBorrowers(double now);
  // Streams (runtime_streams.cc).
  Status OnStreamItem(transport::Envelope& env) EXCLUDES(streams_mu_);
  void OnStreamAck(const proto::StreamAckMsg& msg) EXCLUDES(streams_mu_);
  // The caller's state of `call`'s stream; made when `open` (a generator reads it) or when
  // the call is one this process waits for (a value came before the generator was made).
  std::shared_ptr<StreamState> StreamOf(const ObjectId& call, bool open) EXCLUDES(streams_mu_);
  // The next value of `s` (nullptr at its end, which is `end`'s value; throws its error
  // after the values); false: none yet.
  bool TakeStreamItemLocked(StreamState& s, const internal::RefHolder& end,
                            std::shared_ptr<internal::RefHolder>* out) REQUIRES(s.mu);
  // Tells the producer how far the reader is, when it has read more since it was last told.
  void AckStreamLocked(StreamState& s) REQUIRES(s.mu);
  void SweepStreams() EXCLUDES(streams_mu_);
  // The index of the next value of `call`, once its caller has read enough of those sent.
  // Throws TaskCancelledError when the call was cancelled, the caller dropped the stream, or
  // the caller is gone (probed every kStreamProbeS while it reads nothing).
  uint64_t WaitForStreamWindow(const ObjectId& call, const std::string& caller)
      EXCLUDES(streams_mu_);
  bool NextStreamIndexLocked(const ObjectId& call, uint64_t* index) REQUIRES(streams_mu_);
  // The streaming call `call` ended here, or was cancelled: its producer state goes, or its
  // waits wake.
  void EndProducing(const ObjectId& call) EXCLUDES(streams_mu_);
  void WakeProducers() EXCLUDES(streams_mu_);
  // Frees the store-kept values this process still owns (it is stopping).
  void FreeOwnedObjects();

  std::shared_ptr<internal::RefHolder> NewReturn(ObjectId* id);
  std::shared_ptr<PendingCall> NewCall(const std::string& function,
                                       std::vector<internal::ArgSlot> args,
                                       std::shared_ptr<internal::RefHolder>* ref);
  proto::CreateActorMsg ActorSpec(const ActorId& id, const std::string& factory,
                                  std::vector<internal::ArgSlot> args,
                                  const internal::CallOptions& options) const;
  std::string NamespaceOr(const std::string& given) const;
  // Throws orrery::Error when a Get/Wait (`what`) needing `needed` of `ids` could only be
  // satisfied by an unanswered call to this worker's own actor (SetOwnActor). A poll
  // (timeout_ms 0) never throws.
  void ThrowIfWaitsOnOwnActor(const std::vector<ObjectId>& ids, int needed, int timeout_ms,
                              const char* what);
  // Whether NoteCallFreed noted `id` (among the newest kMaxCancelled).
  bool FreedHere(const ObjectId& id) EXCLUDES(cancel_mu_);

  // Declaration order is construction order: the pieces hold references to what precedes.
  Config config_;
  ProcessIdentity self_;
  transport::Inbox inbox_;
  ObjectStore store_;
  TaskTable task_table_;  // what this process submitted, for `orrery list tasks`
  Outbox& outbox_;
  std::shared_ptr<ObjectClient> objects_;
  Mutex creating_mu_;
  // Objects created in place and not yet sealed: their locations.
  std::map<ObjectId, proto::ObjectLocationMsg> creating_ GUARDED_BY(creating_mu_);
  // Takes `id` out of creating_: its location, or nullopt when it is not there.
  std::optional<proto::ObjectLocationMsg> TakeCreating(const ObjectId& id) EXCLUDES(creating_mu_);
  // Seals, then frees, an object nobody will hear of (both from this thread, so in order).
  void Discard(const ObjectId& id, const proto::ObjectLocationMsg& location);
  HeadClient head_;
  ArgResolver resolver_;
  ActorSubmitter actors_;
  TaskSubmitter tasks_;
  JobRegistration job_;
  WorkingDirs working_dirs_{head_};
  // Freed memory kept for large values, given back from the tick once they stop coming (the
  // inbox thread's alone).
  internal::KeptMemoryReleaser kept_memory_;
  std::function<std::optional<Status>(transport::Envelope&)> extra_;
  // The processes that borrow objects owned here, pinged from the tick: the borrows of one
  // that stopped answering end (docs/objects.md "Lifetime").
  Mutex watch_mu_;
  PeerWatch borrowers_ GUARDED_BY(watch_mu_){kBorrowerPingS, kBorrowerDeadS,
                                             MakeConnectProber(1.0)};
  // A worker's calls: those running, and those their callers cancelled (the newest
  // kMaxCancelled, oldest forgotten first).
  Mutex cancel_mu_;
  std::unordered_set<ObjectId, IdHash> running_ GUARDED_BY(cancel_mu_);
  RecentIds<ObjectId, IdHash> cancelled_ GUARDED_BY(cancel_mu_){kMaxCancelled};
  // An own actor's worker (SetOwnActor): the calls it freed, the newest kMaxCancelled.
  RecentIds<ObjectId, IdHash> freed_ GUARDED_BY(cancel_mu_){kMaxCancelled};
  // Streams: those this process reads (by call), and those its calls produce.
  Mutex streams_mu_;
  std::unordered_map<ObjectId, std::shared_ptr<StreamState>, IdHash> streams_
      GUARDED_BY(streams_mu_);
  std::unordered_map<ObjectId, StreamProducer, IdHash> producing_ GUARDED_BY(streams_mu_);
  // The streams whose generators were dropped (the newest kMaxCancelled).
  RecentIds<ObjectId, IdHash> closed_streams_ GUARDED_BY(streams_mu_){kMaxCancelled};
  CondVar producing_cv_;
  // Async calls: the worker's poster, and the waits of the suspended calls, by call.
  std::function<void(std::function<void()>)> async_post_;
  Mutex async_mu_;
  std::unordered_map<ObjectId, std::vector<std::shared_ptr<AsyncWait>>, IdHash> async_waits_
      GUARDED_BY(async_mu_);
  std::unique_ptr<AsyncTimers> async_timers_ GUARDED_BY(async_mu_);  // made by the first timeout
  std::atomic<bool> actor_worker_{false};
  ActorId own_actor_;  // written once by SetOwnActor, before runs_its_call_ is published
  std::atomic<bool (*)()> runs_its_call_{nullptr};

 public:
  static constexpr double kBorrowerPingS = 2;
  static constexpr double kBorrowerDeadS = 30;  // without a probe that finds it gone
  static constexpr size_t kMaxCancelled = 10000;
  static constexpr int kStreamProbeS = 5;
};

// The result of the call running on this thread, when written into the node's store: set by
// the worker around each call (ScopedCallResult), read back to build its reply.
struct CallResult {
  ObjectId id;        // the call's return object
  std::string owner;  // the caller: it owns the result
  bool stored = false;
  proto::ObjectLocationMsg location;
  // The refs packed inside the result (internal::KeepResultRefs): the reply names them, and
  // the worker holds them until it has sent the reply.
  std::vector<std::shared_ptr<internal::RefHolder>> contained;
  // An async method's call: a blocking wait inside it keeps the actor's call loop, so the
  // actor's other calls run only at its co_await (docs/api.md "Async actors").
  bool async = false;
};
// The CallResult of the call running on this thread, or null.
CallResult* CurrentCallResult();
// The refs a result contains, as its reply names them; past proto::kMaxContainedRefs the
// rest are kept for as long as this process lives.
std::vector<proto::ContainedRefMsg> ContainedRefs(
    const std::vector<std::shared_ptr<internal::RefHolder>>& refs);
// A process's inbox address, as a peer names it: bounded printable text.
bool PlausibleAddress(const std::string& a);

class ScopedCallResult {
 public:
  explicit ScopedCallResult(CallResult* result);
  ~ScopedCallResult();
  ScopedCallResult(const ScopedCallResult&) = delete;
  ScopedCallResult& operator=(const ScopedCallResult&) = delete;

 private:
  CallResult* previous_;
};

// The store-kept values among a call's arguments (ObjectArgMsg exts), read in place: each
// element is replaced by the value it names, which `out` keeps alive (mappings, unpacked
// objects and the keepers that let a Buffer share them) while the call runs.
struct ResolvedArgs {
  std::vector<std::shared_ptr<const MappedObject>> mapped;
  std::vector<internal::BytesView> views;
  std::vector<msgpack::object_handle> handles;
  std::vector<std::unique_ptr<internal::ScopedUnpackKeeper>> keepers;
  ~ResolvedArgs() {
    DropKeepers();
    ReleaseValues();
  }
  // On the thread that resolved the arguments, once they are converted: each keeper restores
  // that thread's unpack state (innermost first).
  void DropKeepers() {
    while (!keepers.empty()) keepers.pop_back();
  }
  // Lets the values go (a Buffer the call kept still holds its own share).
  void ReleaseValues() {
    handles.clear();
    views.clear();
    mapped.clear();
  }
};
// Throws ObjectLostError when an argument cannot be read.
void ResolveObjectArgs(Runtime& rt, const msgpack::object& args, ResolvedArgs* out);

// A worker process may hold 1, 2, 4 or 8 TPU chips (docs/accelerators.md "Devices per worker
// process"): anything else is refused with ConfigError (naming `what`) before it is
// scheduled.
void CheckTpuAmount(const Resources& r, const std::string& what);

// This process's command line, argv[0] replaced by the absolute path of its executable.
std::vector<std::string> SelfCommandLine();

// The runtime of this process, or null before Init / after Shutdown.
Runtime* Current();
// The runtime of this process; throws orrery::Error before Init / after Shutdown.
Runtime& CurrentOrThrow();
void SetCurrent(Runtime* runtime);

}  // namespace orrery::runtime
