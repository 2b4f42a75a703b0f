#include "actors/src/worker.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <optional>

#include "actors/internal/runtime.h"
#include "actors/src/async_calls.h"
#include "actors/src/call_order.h"
#include "actors/src/errors_util.h"
#include "actors/src/executor.h"
#include "core/internal/call_stats.h"
#include "core/internal/clock.h"
#include "core/internal/file_hash.h"
#include "core/internal/kept_memory.h"
#include "core/internal/log.h"
#include "core/internal/thread_annotations.h"
#include "core/internal/transport.h"
#include "orrery/api/registry.h"
#include "orrery/errors.h"

namespace orrery::runtime {

using proto::MsgType;

namespace {

class WorkerServer;
WorkerServer* g_server = nullptr;

// Calls of actors with max_concurrency 1 and of task workers run inline on the call inbox's
// loop thread: no thread hand-off on the call path. When such a call blocks in Get/Wait,
// the loop moves to a new thread so the worker keeps taking messages. An actor's inline
// calls hold its one CallSlot from start to return, waits included: a default actor's
// calls never interleave (docs/api.md), and a call that would wait on a call queued behind
// it on its own actor fails at once (Runtime::Get). Actors with a higher max_concurrency
// run calls on an Executor of that many threads. Task calls share no state and take no
// slot.
class WorkerServer {
 public:
  // A call let go to run, with its arguments.
  using ReadyCall = std::pair<std::shared_ptr<proto::CallMsg>, std::shared_ptr<std::string>>;

  WorkerServer(std::string worker_id, std::string node_address)
      : worker_id_(std::move(worker_id)), node_address_(std::move(node_address)) {
    where_ = "worker pid " + std::to_string(getpid());
  }

  Status StartCallInbox(const std::string& host, const std::string& advertise_host) {
    Status s = calls_.Bind(host, 0, advertise_host);
    if (!s.ok()) return s;
    calls_.SetTick(1000, [this] { OnOrderTick(); });
    calls_.Start([this](transport::Envelope& env) { return HandleCallInbox(env); }, "orrery-calls");
    return Status::Ok();
  }
  const std::string& call_address() const { return calls_.address(); }

  // On the runtime's inbox thread: what became of a message the runtime does not take;
  // nullopt for one this worker does not take either.
  std::optional<Status> Handle(transport::Envelope& env) {
    switch (env.type) {
      case MsgType::kAssign:
        return transport::DecodeAnd<proto::AssignMsg>(env, [this](auto& m) { OnAssign(m); });
      case MsgType::kCall:
        return Status::InvalidArgument("calls go to this worker's call address " +
                                       calls_.address());
      case MsgType::kExit:
        RequestExit();
        return Status::Ok();
      default:
        return std::nullopt;
    }
  }

  // Waits for kExit; meanwhile sends the assignment's reply (SendAssignReply) and, once a
  // second when they changed, the call counts (kWorkerStats, docs/metrics.md) to the node.
  void WaitForExit() EXCLUDES(mu_) {
    using Clock = std::chrono::steady_clock;
    uint64_t submitted = 0;
    auto next = Clock::now() + std::chrono::seconds(1);
    while (true) {
      std::optional<proto::AssignReplyMsg> reply;
      {
        MutexLock lock(&mu_);
        while (!exit_ && !assign_reply_ && cv_.WaitUntil(&mu_, next)) {
        }
        if (exit_) return;
        reply.swap(assign_reply_);
      }
      if (reply) transport::Send(node_address_, MsgType::kAssignReply, *reply);
      if (Clock::now() < next) continue;
      next = Clock::now() + std::chrono::seconds(1);
      proto::WorkerStatsMsg m;
      bool changed = counter_.TakeIfChanged(&m);
      if (!changed && Current()->submitted() == submitted) continue;
      if (!changed) counter_.Snapshot(&m);
      m.worker_id = worker_id_;
      m.pid = int(getpid());
      m.submitted = submitted = Current()->submitted();
      transport::Send(node_address_, MsgType::kWorkerStats, m);
    }
  }

  static void BeforeBlock() {
    if (g_server) g_server->OnBlock();
  }
  // Whether this thread runs a call that no other call of the actor can run beside while it
  // waits: one of a max_concurrency 1 actor (which holds its only slot), or an async call
  // (which keeps the call loop, OnBlock).
  static bool RunsOnlyCall() {
    const CallResult* c = CurrentCallResult();
    return t_holds_slot || (c && c->async);
  }

 private:
  void RequestExit() EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    exit_ = true;
    cv_.NotifyAll();
  }

  // Hands the assignment's reply to the main thread (WaitForExit), connected to the node since
  // it registered: sockets are per thread (transport.h), and the thread that ran the
  // assignment would open a new connection for it (docs/benchmarks.md "Cheap actors").
  void SendAssignReply(proto::AssignReplyMsg reply) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    assign_reply_ = std::move(reply);
    cv_.NotifyAll();
  }

  // On the call inbox's loop thread.
  Status HandleCallInbox(transport::Envelope& env) {
    using transport::DecodeAnd;
    switch (env.type) {
      case MsgType::kCall: {
        auto call = std::make_shared<proto::CallMsg>();
        if (Status s = env.Decode(call.get()); !s.ok()) return s;
        OnCall(std::move(call), std::make_shared<std::string>(env.PayloadString()));
        return Status::Ok();
      }
      case MsgType::kCallsSent:
        return DecodeAnd<proto::CallsSentMsg>(env, [this](auto& m) { OnCallsSent(m); });
      case MsgType::kCancel:  // from a caller that knows no control address (a restarted head)
        return DecodeAnd<proto::CancelMsg>(env, [](auto& m) { Current()->OnCancel(m); });
      default:
        return Status::InvalidArgument(std::string("the call address only takes calls, not ") +
                                       proto::TypeName(env.type));
    }
  }

  void OnAssign(const proto::AssignMsg& m) {
    if (assigned_.exchange(true)) return;
    where_ += " on node " + UniqueId::FromBinary(m.node_id).Hex().substr(0, 8);
    if (!m.is_actor) {
      ready_ = true;
      SendAssignReply(proto::AssignReplyMsg{worker_id_, "", true, proto::ErrorKind::kNone, "", ""});
      return;
    }
    const auto& spec = m.actor.spec;
    actor_id_ = spec.actor_id;
    Current()->SetActorWorker();
    Current()->SetOwnActor(ActorId(UniqueId::FromBinary(spec.actor_id)),
                           &WorkerServer::RunsOnlyCall);
    log::SetProcessTag("worker " + std::to_string(getpid()) + " " + spec.factory);
    int async_limit =
        spec.options.max_async_calls > 0 ? spec.options.max_async_calls : proto::kDefaultAsyncCalls;
    AsyncCalls::Hooks hooks;
    hooks.reply = [this](auto&&... a) { Reply(a...); };
    hooks.ended = [this](const proto::CallMsg& call) {
      order_.Finished(call.reply_to, MonotonicSeconds());
      Nudge();
    };
    async_ = std::make_unique<AsyncCalls>(async_limit, counter_, std::move(hooks));
    // Resumptions run on the loop's owner only: never beside another call's part.
    Current()->SetAsyncPoster([this](std::function<void()> work) { PostOnLoop(std::move(work)); });
    auto create = [this, spec] { CreateActor(spec); };
    if (spec.options.max_concurrency > 1) {
      executor_ = std::make_unique<Executor>(spec.options.max_concurrency);
      executor_->Submit(create);
    } else {
      calls_.Post(create);
    }
  }

  void CreateActor(const proto::ActorSpecMsg& spec) {
    proto::AssignReplyMsg reply{worker_id_, spec.actor_id, true, proto::ErrorKind::kNone, "", ""};
    const internal::FunctionEntry* e = internal::FindByName(spec.factory);
    if (!e || e->kind != internal::FunctionKind::kFactory) {
      reply = {
          worker_id_, spec.actor_id,
          false,      proto::ErrorKind::kFunctionNotFoundError,
          "",         "actor factory '" + spec.factory + "' is not registered in this executable"};
    } else {
      try {
        msgpack::object_handle oh = internal::UnpackUntrusted(spec.args.data(), spec.args.size(),
                                                              internal::kValueUnpackLimits);
        void* instance = nullptr;
        e->invoke(nullptr, oh.get(), &instance);
        instance_ = instance;
      } catch (...) {
        CallFailure f = FailureOf(std::current_exception());
        reply = {worker_id_, spec.actor_id, false, proto::ErrorKind::kRemoteError,
                 f.type,     f.message};
      }
    }
    ready_ = reply.ok;
    SendAssignReply(std::move(reply));
  }

  void OnCall(std::shared_ptr<proto::CallMsg> call, std::shared_ptr<std::string> payload) {
    LOG_DEBUG("call " + call->function + " " +
              UniqueId::FromBinary(call->object_id).Hex().substr(0, 8));
    if (!ready_) {
      Reply(*call, false, proto::ErrorKind::kError, "", "this worker has no assignment yet",
            nullptr);
      return;
    }
    if (call->actor_id.empty()) {
      ready_calls_.emplace_back(call, payload);
      RunReady();
      return;
    }
    if (call->actor_id != actor_id_) {
      Reply(*call, false, proto::ErrorKind::kActorDiedError, "",
            "this worker does not host that actor", nullptr);
      return;
    }
    // Start calls of one caller in sequence order.
    std::vector<ReadyCall> ready;
    auto admit = order_.Add(call->reply_to, call->seq, call->first_pending, {call, payload},
                            MonotonicSeconds(), &ready);
    if (admit != CallOrder<ReadyCall>::Admit::kQueued) {
      Reply(*call, false, proto::ErrorKind::kError, "",
            admit == CallOrder<ReadyCall>::Admit::kDuplicate ? "duplicate call sequence number"
            : admit == CallOrder<ReadyCall>::Admit::kTooMany
                ? "too many calls of this caller wait for an earlier one that has not arrived"
                : "this actor serves too many callers at once",
            nullptr);
      return;
    }
    RunReady(std::move(ready));
  }

  void OnCallsSent(const proto::CallsSentMsg& m) {
    if (m.actor_id != actor_id_ || !ready_) return;
    std::vector<ReadyCall> ready;
    order_.Expect(m.reply_to, m.first_pending, m.end_seq, MonotonicSeconds(), &ready);
    RunReady(std::move(ready));
  }

  // On the call loop's tick: numbers missing too long are given up on; their callers hear of
  // it (kCallsLost) and fail those calls with ConnectionError instead of waiting forever.
  void OnOrderTick() {
    std::vector<ReadyCall> ready;
    std::vector<LostCalls> lost;
    order_.Tick(MonotonicSeconds(), calls_.CaughtUp(), &ready, &lost);
    for (const auto& l : lost) {
      std::string why = "calls " + std::to_string(l.first_seq) + " to " +
                        std::to_string(l.end_seq - 1) + " from " + l.caller + " never reached " +
                        where_ + " (lost on the way)";
      LOG_WARN(why + "; the calls behind them go on");
      transport::Send(
          l.caller, MsgType::kCallsLost,
          proto::CallsLostMsg{actor_id_, calls_.address(), l.first_seq, l.end_seq, why});
    }
    RunReady(std::move(ready));
  }

  // Queues `released` (calls CallOrder let go, in their order), then runs the calls that are
  // ready, in order, while this thread owns the call loop. An actor call that finds the slot
  // taken stays queued; whoever gives the slot up next posts RunReady to the loop again.
  void RunReady(std::vector<ReadyCall> released = {}) {
    for (auto& r : released) ready_calls_.push_back(std::move(r));
    while (calls_.OwnsLoop() && !ready_calls_.empty()) {
      auto [call, payload] = ready_calls_.front();
      const internal::FunctionEntry* e = internal::FindByName(call->function);
      if (async_ && AsyncCalls::IsAsync(*call, e)) {
        if (async_->Full()) return;  // the next to end nudges the loop
        ready_calls_.pop_front();
        async_->Start(*e, instance_, call, payload);
        continue;
      }
      bool slotted = !executor_ && !call->actor_id.empty();
      if (slotted && !slot_.TryTake()) return;
      ready_calls_.pop_front();
      // On a thread of its own from now (an executor's, or this one once a wait in it hands
      // the loop off): a call may wait on it (Runtime::SetOwnActor).
      if (!call->actor_id.empty())
        Current()->NoteCallFreed(ObjectId(UniqueId::FromBinary(call->object_id)));
      if (executor_) {
        executor_->Submit(
            [this, call = call, payload = payload, e] { Execute(*call, payload, e); });
        continue;
      }
      t_holds_slot = slotted;
      Execute(*call, payload, e);
      if (t_holds_slot) {
        t_holds_slot = false;
        ReleaseSlot();
      }
    }
  }

  // Gives the inline slot up and makes sure a queued call gets to start: by this thread's
  // RunReady loop when it still owns the call loop, else by the loop's current owner.
  void ReleaseSlot() {
    slot_.Release();
    if (!calls_.OwnsLoop()) Nudge();
  }

  // Runs `work` on the call loop's owner. A posted function can run on a thread that has
  // just handed the loop off (the rest of its batch of posted work): passed on then.
  void PostOnLoop(std::function<void()> work) {
    calls_.Post([this, work = std::move(work)]() mutable {
      if (calls_.OwnsLoop()) return work();
      PostOnLoop(std::move(work));
    });
  }
  // Has the call loop's owner run RunReady.
  void Nudge() {
    PostOnLoop([this] { RunReady(); });
  }

  // Before a Get/Wait on any thread of this process: the call loop moves to a new thread
  // (the waiting call keeps its slot). Not from an async call: a plain wait inside a
  // coroutine blocks the loop, as a blocking call in an event loop does, so that between
  // two co_awaits the call runs alone.
  void OnBlock() {
    if (const CallResult* c = CurrentCallResult(); c && c->async) return;
    if (calls_.OwnsLoop()) calls_.HandOff([this] { RunReady(); });
  }

  void Reply(const proto::CallMsg& call, bool ok, proto::ErrorKind kind, const std::string& type,
             const std::string& message, const std::string* result,
             const CallResult* stored = nullptr, transport::Order order = transport::Order::kKept) {
    proto::ReplyMsg r{.object_id = call.object_id,
                      .ok = ok,
                      .error_kind = kind,
                      .error_type = type,
                      .message = message,
                      .function = call.function,
                      .where = where_,
                      .actor_id = call.actor_id,
                      .seq = call.seq,
                      .lease_id = call.lease_id};
    if (stored && stored->stored) r.location = stored->location;
    if (stored) r.contained = ContainedRefs(stored->contained);
    static const std::string kEmpty;
    transport::SendFrames(call.reply_to, proto::EncodeFrame(MsgType::kCallReply, r),
                          result ? result : &kEmpty, order);
  }

  // Runs `call` of `e` (what it names; null: nothing registered) and replies.
  void Execute(const proto::CallMsg& call, const std::shared_ptr<std::string>& args,
               const internal::FunctionEntry* e) {
    CountedCall counted(counter_);
    struct Ordered {  // an actor call's end lets its caller be forgotten once idle
      CallOrder<ReadyCall>* order;
      const std::string& caller;
      ~Ordered() {
        if (order) order->Finished(caller, MonotonicSeconds());
      }
    } ordered{call.actor_id.empty() ? nullptr : &order_, call.reply_to};
    bool is_actor = !call.actor_id.empty();
    if (!e || e->kind != (is_actor ? internal::FunctionKind::kMethod
                                   : internal::FunctionKind::kFunction)) {
      std::string what = !e ? "registered in the worker's executable"
                            : (is_actor ? "an actor method" : "a remote function");
      Reply(call, false, proto::ErrorKind::kFunctionNotFoundError, "",
            "'" + call.function + "' is not " + what, nullptr);
      return;
    }
    CallResult stored{ObjectId(UniqueId::FromBinary(call.object_id)), call.reply_to};
    const uint64_t ordered_sends = transport::ThreadOrderedSends();
    Runtime& rt = *Current();
    if (!rt.BeginCall(stored.id)) {
      Reply(call, false, proto::ErrorKind::kTaskCancelledError, "",
            "'" + call.function + "' was cancelled by its caller before it started", nullptr);
      return;
    }
    struct EndCall {
      Runtime& rt;
      const ObjectId& id;
      ~EndCall() { rt.EndCall(id); }
    } end_call{rt, stored.id};
    try {
      msgpack::object_handle oh =
          internal::UnpackUntrusted(args->data(), args->size(), internal::kValueUnpackLimits);
      // Inline Buffer arguments share the call's payload; store-kept ones the store's memory.
      internal::ScopedUnpackKeeper keeper(args->data(), args->size(), args);
      std::string result;
      {
        // The store-kept arguments are let go before the reply: their store memory is free
        // for the caller's next value once it hears back (docs/objects.md "Speed").
        ResolvedArgs resolved;
        ResolveObjectArgs(*Current(), oh.get(), &resolved);
        ScopedCallResult scope(&stored);
        result = e->invoke(instance_, oh.get(), nullptr);
      }
      // Before the reply: the next call's messages would start carving the rooms let go.
      internal::ReclaimLandings();
      Reply(call, true, proto::ErrorKind::kNone, "", "", &result, &stored,
            ReplyOrder(ordered_sends));
      counted.ok = true;
    } catch (...) {
      internal::ReclaimLandings();  // a call that failed lets its arguments go too
      ReplyFailure(call, std::current_exception(), ReplyOrder(ordered_sends));
    }
  }

  // A call's reply may overtake its thread's earlier messages (and so take the direct path,
  // transport::Order) unless the call sent ordered ones while it ran: a stream's values, a
  // borrow of a ref it keeps, which must reach their peers before the reply.
  static transport::Order ReplyOrder(uint64_t ordered_sends_before) {
    return transport::ThreadOrderedSends() == ordered_sends_before ? transport::Order::kAny
                                                                   : transport::Order::kKept;
  }

  void ReplyFailure(const proto::CallMsg& call, std::exception_ptr error,
                    transport::Order order = transport::Order::kKept) {
    CallFailure f = FailureOf(error);
    Reply(call, false, f.kind, f.type, f.message, nullptr, nullptr, order);
  }

  std::string worker_id_;
  std::string node_address_;
  std::string where_;
  std::string actor_id_;
  transport::Inbox calls_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<AsyncCalls> async_;  // an actor's: set before ready_
  void* instance_ = nullptr;
  std::atomic<bool> assigned_{false};
  std::atomic<bool> ready_{false};
  CallOrder<ReadyCall> order_;  // any thread
  // Owned by the call loop's current thread.
  std::deque<ReadyCall> ready_calls_;
  CallSlot slot_;
  CallCounter counter_;  // any call thread; read by WaitForExit
  // Whether this thread runs an inline actor call, which holds slot_.
  static thread_local bool t_holds_slot;
  // Only the exit request and the assignment's reply are under a lock. The assignment above
  // is written once on the runtime's inbox thread and published to the call threads by the
  // atomic ready_; the call-order state belongs to the call loop's thread.
  Mutex mu_;
  CondVar cv_;
  bool exit_ GUARDED_BY(mu_) = false;
  std::optional<proto::AssignReplyMsg> assign_reply_ GUARDED_BY(mu_);
};

thread_local bool WorkerServer::t_holds_slot = false;

}  // namespace

void WorkerMain() {
  std::string worker_id = WorkerEnv("ORRERY_WORKER_ID");
  std::string node = WorkerEnv("ORRERY_NODE_ADDRESS");
  std::string head = WorkerEnv("ORRERY_HEAD_ADDRESS");
  Config config = PrepareWorkerProcess();
  ObjectStore::SetBlockHooks(&WorkerServer::BeforeBlock, nullptr);
  // Leaked on purpose: the process ends with _exit, never by unwinding.
  auto* rt = new Runtime(config, head, JobId(), "worker pid " + std::to_string(getpid()));
  // Actors and tasks this worker submits run its own executable, named as its node named it.
  if (const char* h = std::getenv("ORRERY_EXECUTABLE_HASH"); h && IsContentHash(h))
    rt->SetExecutableHash(h);
  auto* server = new WorkerServer(worker_id, node);
  g_server = server;
  rt->SetExtraHandler([server](transport::Envelope& env) { return server->Handle(env); });
  std::string host = config.node_ip.empty() ? "127.0.0.1" : config.node_ip;
  // The call inbox is bound first: the runtime's thread reads its address (Handle), so it
  // must be set before that thread starts. No call arrives before kWorkerRegister below.
  auto advertise = AdvertiseAddressFromEnv();
  Status s = advertise.status();
  if (s.ok()) s = server->StartCallInbox(host, advertise.value());
  if (s.ok()) s = rt->Start(host, advertise.value());
  if (!s.ok()) {
    std::fprintf(stderr, "orrery worker: %s\n", s.message().c_str());
    _exit(2);
  }
  SetCurrent(rt);
  rt->objects().SetNode(node);  // values above 100 KiB go through the node's store
  transport::Send(
      node, MsgType::kWorkerRegister,
      proto::WorkerRegisterMsg{worker_id, rt->address(), int(getpid()), server->call_address()});
  server->WaitForExit();
  std::fflush(nullptr);
  transport::RemoveLocalSockets();
  _exit(0);
}

}  // namespace orrery::runtime
