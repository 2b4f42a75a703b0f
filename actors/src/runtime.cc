#include "actors/src/runtime.h"

#include <unistd.h>

#include <chrono>
#include <fstream>

#include "actors/src/errors_util.h"
#include "core/src/clock.h"
#include "core/src/file_hash.h"
#include "core/src/log.h"
#include "orrery/errors.h"
#include "orrery/resources.h"

namespace orrery::runtime {

using proto::MsgType;

namespace {
std::atomic<Runtime*> g_current{nullptr};
constexpr int kIdleTickMs = 1000;
constexpr int kRpcResendMs = 1000;
constexpr int kClientConnectTimeoutMs = 5000;

double Now() { return MonotonicSeconds(); }

// Every request/reply message starts with its request_id (MSGPACK_DEFINE order).
uint64_t RequestIdOf(const transport::Envelope& env) {
  try {
    auto meta = env.meta();
    msgpack::object_handle oh =
        internal::UnpackUntrusted(meta.data(), meta.size(), internal::kControlUnpackLimits);
    const msgpack::object& o = oh.get();
    if (o.type == msgpack::type::ARRAY && o.via.array.size > 0)
      return o.via.array.ptr[0].as<uint64_t>();
  } catch (const std::exception&) {
  }
  return 0;
}
}  // namespace

std::vector<std::string> SelfCommandLine() {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string arg;
  while (std::getline(in, arg, '\0')) out.push_back(arg);
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  std::string path = n > 0 ? std::string(exe, size_t(n)) : std::string();
  if (out.empty()) out.push_back(path);
  if (!path.empty()) out[0] = path;
  return out;
}

Runtime* Current() { return g_current.load(std::memory_order_acquire); }
void SetCurrent(Runtime* r) { g_current.store(r, std::memory_order_release); }

Runtime::Runtime(Config config, std::string head_address, JobId job, std::string where)
    : config_(std::move(config)),
      head_address_(std::move(head_address)),
      job_(job),
      where_(std::move(where)),
      argv_(SelfCommandLine()) {}

Runtime::~Runtime() { Stop(); }

Status Runtime::Start(const std::string& bind_host) {
  inbox_.SetMaxMessageBytes(config_.max_message_bytes);
  Status s = inbox_.Bind(bind_host);
  if (!s.ok()) return s;
  // Ticks return idle task leases; they run often only while this process holds leases.
  inbox_.SetTick(kIdleTickMs, [this] { Tick(); });
  inbox_.Start([this](transport::Envelope& env) { Handle(env); }, "orrery-rt");
  return Status::Ok();
}

void Runtime::Stop() {
  {
    // Leases (granted or still requested) go back to the head, so their resources do not
    // stay reserved for a driver that is gone.
    MutexLock lock(&tasks_mu_);
    std::vector<std::string> ids;
    for (const auto& [id, l] : leases_) ids.push_back(id);
    for (const auto& id : ids) ReturnLease(id, false);
  }
  inbox_.Stop();
}

// ------------------------------------------------------------------ messages

void Runtime::Handle(transport::Envelope& env) {
  switch (env.type) {
    case MsgType::kCallReply:
      return OnCallReply(env);
    case MsgType::kActorUpdate: {
      proto::ActorUpdateMsg m;
      Status s = env.Decode(&m);
      if (!s.ok()) throw std::runtime_error(s.message());
      return OnActorUpdate(m);
    }
    case MsgType::kLeaseReply: {
      proto::LeaseReplyMsg m;
      Status s = env.Decode(&m);
      if (!s.ok()) throw std::runtime_error(s.message());
      return OnLeaseReply(m);
    }
    case MsgType::kGetObject: {
      proto::GetObjectMsg m;
      Status s = env.Decode(&m);
      if (!s.ok()) throw std::runtime_error(s.message());
      return OnGetObject(m);
    }
    case MsgType::kObjectReply:
      return OnObjectReply(env);
    case MsgType::kAck:
    case MsgType::kGetNamedActorReply:
    case MsgType::kClusterInfoReply:
    case MsgType::kPlacementGroupReply:
      return CompleteRpc(RequestIdOf(env), env);
    case MsgType::kError: {
      proto::ErrorMsg m;
      (void)env.Decode(&m);
      LOG_WARN("a peer rejected a message from " + address() + ": " + m.message);
      return;
    }
    case MsgType::kPing: {
      proto::PingMsg m;
      Status s = env.Decode(&m);
      if (!s.ok()) throw std::runtime_error(s.message());
      if (!m.reply_to.empty()) transport::Send(m.reply_to, MsgType::kPong, m);
      return;
    }
    default:
      if (extra_ && extra_(env)) return;
      throw std::runtime_error(std::string("unexpected message ") + proto::TypeName(env.type));
  }
}

void Runtime::OnCallReply(transport::Envelope& env) {
  proto::ReplyMsg r;
  Status s = env.Decode(&r);
  if (!s.ok()) throw std::runtime_error(s.message());
  ObjectId id(UniqueId::FromBinary(r.object_id));
  LOG_DEBUG("reply " + r.function + " " + id.Hex().substr(0, 8) + (r.ok ? " ok" : " error"));
  if (!r.actor_id.empty()) {
    // A reply naming an actor this process never called changes nothing (and adds no entry).
    if (auto a = FindActor(ActorId(UniqueId::FromBinary(r.actor_id)))) {
      MutexLock lock(&a->mu);
      a->inflight.erase(r.seq);
    }
  } else if (!r.lease_id.empty()) {
    MutexLock lock(&tasks_mu_);
    auto it = leases_.find(r.lease_id);
    if (it != leases_.end()) {
      Lease& l = it->second;
      l.inflight.erase(id);
      PumpTasks(l.key);
      if (l.inflight.empty()) l.idle_since = Now();
    }
  }
  if (r.ok) {
    store_.PutValue(id, std::make_shared<const std::string>(env.PayloadString()));
  } else {
    store_.PutError(id, ObjectError{r.error_kind, r.error_type, r.message, r.function, r.where});
  }
}

void Runtime::OnGetObject(const proto::GetObjectMsg& m) {
  ObjectId id(UniqueId::FromBinary(m.object_id));
  std::string reply_to = m.reply_to;
  auto send = [reply_to, oid = m.object_id](const ObjectValue& v) {
    proto::ReplyMsg r;
    r.object_id = oid;
    r.ok = v.bytes != nullptr;
    if (v.error) {
      r.error_kind = v.error->kind;
      r.error_type = v.error->type;
      r.message = v.error->message;
      r.function = v.error->function;
      r.where = v.error->where;
    }
    std::string empty;
    transport::Send(reply_to, MsgType::kObjectReply, r, v.bytes ? v.bytes.get() : &empty);
  };
  if (store_.Lookup(id) == ObjectStore::Presence::kAbsent) {
    send(ObjectValue{
        nullptr,
        std::make_shared<const ObjectError>(ObjectError{
            "Error", "", "object " + id.Hex() + " is no longer held by its owner", "", where_})});
    return;
  }
  store_.Pin(id);
  store_.OnReady(id, send);
}

void Runtime::OnObjectReply(transport::Envelope& env) {
  proto::ReplyMsg r;
  Status s = env.Decode(&r);
  if (!s.ok()) throw std::runtime_error(s.message());
  ObjectId id(UniqueId::FromBinary(r.object_id));
  if (r.ok) {
    store_.PutValue(id, std::make_shared<const std::string>(env.PayloadString()));
  } else {
    store_.PutError(id, ObjectError{r.error_kind, r.error_type, r.message, r.function, r.where});
  }
}

proto::JobMsg JobInfo(const JobId& job, const std::string& address, const Config& config,
                      const std::vector<std::string>& argv, bool alive) {
  proto::JobMsg m;
  m.job_id = job.Binary();
  m.driver_address = address;
  m.pid = int(getpid());
  m.namespace_ = config.namespace_.empty() ? "default" : config.namespace_;
  m.entrypoint = argv.empty() ? "" : argv[0];
  m.alive = alive;
  return m;
}

void Runtime::RegisterJob() {
  if (const char* c = std::getenv("ORRERY_CLIENT_ONLY"); c && std::string(c) == "1") {
    // Inspection tools (`orrery status`): no job, no executable upload; still check, with
    // a short deadline, that the head answers.
    Rpc<proto::ClusterInfoMsg>(MsgType::kGetClusterInfo, proto::ClusterInfoMsg{},
                               MsgType::kClusterInfoReply, kClientConnectTimeoutMs);
    return;
  }
  auto m = JobInfo(job_, address(), config_, argv_, true);
  if (!config_.address.empty()) {
    // A cluster: nodes on other hosts may lack this executable and fetch it from the head.
    binary_hash_ = HashFile(argv_[0]);
    arch_ = MachineArch();
    m.binary_hash = binary_hash_;
    m.arch = arch_;
  }
  auto ack = Rpc<proto::AckMsg>(MsgType::kRegisterJob, m, MsgType::kAck);
  if (!ack.ok && ack.error_kind == "NeedBinary") {
    std::ifstream in(argv_[0], std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    proto::BinaryMsg put{0, "", binary_hash_, arch_, true, ""};
    put.job_id = job_.Binary();  // the head stores only the executable this job registered
    auto stored = RpcWithPayload<proto::AckMsg>(MsgType::kPutBinary, put, bytes, MsgType::kAck);
    if (!stored.ok)
      throw ConnectionError("the head could not store this program's executable: " +
                            stored.message);
    ack = Rpc<proto::AckMsg>(MsgType::kRegisterJob, m, MsgType::kAck);
  }
  if (!ack.ok) ThrowKind(ack.error_kind, "the head refused the job: " + ack.message);
  job_registered_ = true;
}

void Runtime::EndJob(int timeout_ms) {
  if (!job_registered_.exchange(false)) return;
  // Acknowledged, so that the head has freed the job's actors, names and leases before this
  // process exits (a message still queued at exit is lost). A head that does not answer
  // costs timeout_ms; it then ends the job when the heartbeats stop.
  try {
    Rpc<proto::AckMsg>(MsgType::kRegisterJob, JobInfo(job_, address(), config_, argv_, false),
                       MsgType::kAck, timeout_ms);
  } catch (const Error& e) {
    LOG_WARN(std::string("the head did not acknowledge the end of the job: ") + e.what());
  }
}

void Runtime::Tick() {
  double now = Now();
  if (job_registered_ && now - last_job_heartbeat_ >= 1.0) {
    last_job_heartbeat_ = now;
    // With its executable's hash: a head that lost the job (a Redis that lost its data)
    // takes the heartbeat as the registration, and the job's work names that executable.
    auto m = JobInfo(job_, address(), config_, argv_, true);
    m.binary_hash = binary_hash_;
    m.arch = arch_;
    transport::Send(head_address_, MsgType::kRegisterJob, m);
  }
  MutexLock lock(&tasks_mu_);
  double idle = config_.task_lease_idle_ms / 1000.0;
  std::vector<std::string> expired;
  for (auto& [id, l] : leases_) {
    if (l.worker_address.empty()) continue;  // requested, not granted yet
    if (l.inflight.empty() && task_keys_[l.key].queue.empty() && now - l.idle_since >= idle)
      expired.push_back(id);
  }
  for (const auto& id : expired) ReturnLease(id, false);
  if (leases_.empty()) inbox_.SetTickPeriod(kIdleTickMs);
}

// ------------------------------------------------------------------ actors

std::shared_ptr<Runtime::ActorState> Runtime::FindActor(const ActorId& id) {
  MutexLock lock(&actors_mu_);
  auto it = actors_.find(id);
  return it == actors_.end() ? nullptr : it->second;
}

std::shared_ptr<Runtime::ActorState> Runtime::ActorFor(const ActorId& id, bool subscribe) {
  std::shared_ptr<ActorState> a;
  {
    MutexLock lock(&actors_mu_);
    auto& slot = actors_[id];
    if (!slot) slot = std::make_shared<ActorState>();
    a = slot;
  }
  if (subscribe) {
    bool send = false;
    {
      MutexLock lock(&a->mu);
      if (!a->subscribed) send = a->subscribed = true;
    }
    if (send)
      transport::Send(head_address_, MsgType::kSubscribeActor,
                      proto::SubscribeActorMsg{id.Binary(), address()});
  }
  return a;
}

void CheckTpuAmount(const Resources& r, const std::string& what) {
  auto it = r.find("TPU");
  if (it == r.end()) return;
  double v = it->second;
  if (v != 1 && v != 2 && v != 4 && v != 8) {
    throw ConfigError(what + ": {\"TPU\": " + std::to_string(v) +
                      "} is not an amount one worker process can hold; use 1, 2, 4 or 8 chips (8: "
                      "a whole 8-chip host)");
  }
}

ActorId Runtime::CreateActor(const std::string& factory, std::vector<internal::ArgSlot> args,
                             const internal::CallOptions& options) {
  Status s = ValidateResources(options.resources);
  if (!s.ok()) throw ConfigError("actor " + factory + ": " + s.message());
  CheckTpuAmount(options.resources, "actor " + factory);
  if (options.max_concurrency < 1)
    throw ConfigError("actor " + factory + ": max_concurrency must be at least 1");
  if (options.bundle_index >= 0 && options.placement_group.IsNil()) {
    throw ConfigError("actor " + factory + ": a bundle index needs a placement group");
  }
  // Constructor arguments are resolved before the actor is scheduled.
  for (auto& slot : args) {
    if (!slot.ref) continue;
    slot.bytes = *Get(*slot.ref, -1);
    slot.ref = nullptr;
  }
  ActorId id = ActorId::Random();
  proto::CreateActorMsg m;
  m.spec.actor_id = id.Binary();
  m.spec.job_id = job_.Binary();
  m.spec.factory = factory;
  m.spec.args = PackArgs(args);
  m.spec.owner = address();
  auto& o = m.spec.options;
  o.resources = options.resources;
  o.label_selector = options.label_selector;
  o.name = options.name;
  o.namespace_ = options.namespace_.empty()
                     ? (config_.namespace_.empty() ? "default" : config_.namespace_)
                     : options.namespace_;
  o.max_restarts = options.max_restarts;
  o.max_task_retries = options.max_task_retries;
  o.max_concurrency = options.max_concurrency;
  o.lifetime = int(options.lifetime);
  o.placement_group =
      options.placement_group.IsNil() ? std::string() : options.placement_group.Binary();
  o.bundle_index = options.bundle_index;
  o.strategy = options.strategy;
  o.affinity_node = options.affinity_node.IsNil() ? std::string() : options.affinity_node.Binary();
  o.affinity_soft = options.affinity_soft;
  m.spec.infeasible_timeout_s = config_.infeasible_timeout_s;
  m.spec.argv = argv_;
  m.spec.binary_hash = binary_hash_;
  m.spec.arch = arch_;

  auto a = ActorFor(id, false);
  {
    MutexLock lock(&a->mu);
    a->subscribed = true;  // the owner is subscribed by the head
    a->owned = true;
    a->detached = options.lifetime == ActorLifetime::kDetached;
    a->max_task_retries = options.max_task_retries;
  }
  if (o.name.empty()) {
    // Nothing to check synchronously: any failure reaches the caller as an actor update
    // (the owner is subscribed), so creation does not wait for the head.
    m.reply_to.clear();  // no acknowledgement wanted
    transport::Send(head_address_, MsgType::kCreateActor, m);
    return id;
  }
  // A name must be unique in its namespace: the head's answer decides, now.
  auto reply = Rpc<proto::AckMsg>(MsgType::kCreateActor, m, MsgType::kAck);
  if (!reply.ok) {
    MutexLock lock(&actors_mu_);
    actors_.erase(id);
    ThrowKind(reply.error_kind, reply.message);
  }
  return id;
}

std::shared_ptr<internal::RefHolder> Runtime::SubmitActorTask(const ActorId& actor,
                                                              const std::string& method,
                                                              std::vector<internal::ArgSlot> args) {
  auto a = ActorFor(actor, true);
  auto call = std::make_shared<PendingCall>();
  auto ref = NewReturn(&call->return_id);
  call->function = method;
  call->slots = std::move(args);
  {
    MutexLock lock(&a->mu);
    if (a->state == proto::ActorState::kDead) {
      FailCall(*call, a->death);
      return ref;
    }
    call->retries_left = a->max_task_retries;
    call->unresolved = 1;
    a->queue.push_back(call);
  }
  Resolve(call, [this, actor, a, call] {
    MutexLock lock(&a->mu);
    call->unresolved = 0;
    DispatchActor(actor, *a);
  });
  return ref;
}

void Runtime::DispatchActor(const ActorId& id, ActorState& a) {
  while (!a.queue.empty()) {
    auto call = a.queue.front();
    if (call->unresolved > 0) break;
    if (call->dep_error) {
      a.queue.pop_front();
      FailCall(*call, *call->dep_error);
      continue;
    }
    if (a.state == proto::ActorState::kDead) {
      a.queue.pop_front();
      FailCall(*call, a.death);
      continue;
    }
    if (a.state != proto::ActorState::kAlive) break;
    a.queue.pop_front();
    call->seq = a.next_seq++;
    proto::CallMsg m;
    m.object_id = call->return_id.Binary();
    m.reply_to = address();
    m.actor_id = id.Binary();
    m.seq = call->seq;
    m.function = call->function;
    Status sent = transport::TrySend(a.address, MsgType::kCall, m, &call->args);
    if (!sent.ok()) {
      FailCall(*call,
               ObjectError{"Error", "",
                           "the call to " + call->function + " was not sent: " + sent.message(),
                           call->function, ""});
      continue;
    }
    a.inflight[call->seq] = call;
  }
}

void Runtime::OnActorUpdate(const proto::ActorUpdateMsg& u) {
  ActorId id(UniqueId::FromBinary(u.actor_id));
  auto a = FindActor(id);
  if (!a) return;  // not an actor this process created or called: nothing to update
  MutexLock lock(&a->mu);
  if (a->state == proto::ActorState::kDead) return;
  if (u.incarnation < a->incarnation) return;
  auto state = proto::ActorState(u.state);
  // Calls sent to an incarnation that is gone: retry those with retries left, fail the rest
  // (with OutOfMemoryError when a node's memory monitor killed it).
  auto requeue_inflight = [&](const std::string& why) {
    a->mu.AssertHeld();  // called only below, under the lock (a lambda is analysed on its own)
    bool oom = u.death_kind == "OutOfMemoryError";
    for (auto it = a->inflight.rbegin(); it != a->inflight.rend(); ++it) {
      auto& call = it->second;
      if (call->retries_left != 0) {
        if (call->retries_left > 0) --call->retries_left;
        a->queue.push_front(call);
      } else {
        FailCall(*call,
                 ObjectError{oom ? u.death_kind : "ActorDiedError", "",
                             (oom ? "actor method " + call->function + " failed: "
                                  : "the actor died while running " + call->function + ": ") +
                                 why,
                             call->function, ""});
      }
    }
    a->inflight.clear();
  };
  if (state == proto::ActorState::kAlive) {
    if (u.incarnation <= a->killed_incarnation) return;  // the instance we killed
    if (u.incarnation != a->incarnation) {
      if (a->incarnation >= 0) requeue_inflight(u.death_cause);
      a->incarnation = u.incarnation;
      a->next_seq = 0;
    }
    a->state = state;
    a->address = u.address;
    DispatchActor(id, *a);
  } else if (state == proto::ActorState::kRestarting) {
    transport::MarkPeerGone(a->address);
    requeue_inflight(u.death_cause);
    a->state = state;
    a->address.clear();
  } else if (state == proto::ActorState::kDead) {
    transport::MarkPeerGone(a->address);
    a->state = state;
    std::string kind = u.death_kind.empty() ? "ActorDiedError" : u.death_kind;
    a->death = ObjectError{
        kind, "",
        kind == "ActorDiedError" ? "actor " + id.Hex() + " died: " + u.death_cause : u.death_cause,
        "", ""};
    for (auto& [seq, call] : a->inflight) FailCall(*call, a->death);
    a->inflight.clear();
    DispatchActor(id, *a);  // fails the queue
  }
}

void Runtime::KillActor(const ActorId& actor, bool no_restart) {
  transport::Send(head_address_, MsgType::kKillActor,
                  proto::KillActorMsg{actor.Binary(), no_restart});
  auto a = ActorFor(actor, false);
  MutexLock lock(&a->mu);
  if (a->state == proto::ActorState::kDead) return;
  if (!no_restart) {
    // Later calls wait for the next incarnation (or fail if there is none).
    if (a->state == proto::ActorState::kAlive) {
      a->killed_incarnation = a->incarnation;
      a->state = proto::ActorState::kRestarting;
      a->address.clear();
    }
    return;
  }
  a->state = proto::ActorState::kDead;
  a->death = ObjectError{"ActorDiedError", "",
                         "actor " + actor.Hex() + " was killed by orrery::Kill", "", ""};
  for (auto& [seq, call] : a->inflight) FailCall(*call, a->death);
  a->inflight.clear();
  DispatchActor(actor, *a);
}

void Runtime::KillOwnedActors() {
  std::vector<ActorId> owned;
  {
    MutexLock lock(&actors_mu_);
    for (auto& [id, a] : actors_) {
      MutexLock l(&a->mu);
      if (a->owned && !a->detached && a->state != proto::ActorState::kDead) owned.push_back(id);
    }
  }
  for (const auto& id : owned) KillActor(id, true);
}

ActorId Runtime::GetNamedActor(const std::string& name, const std::string& ns) {
  proto::NamedActorMsg m;
  m.name = name;
  m.namespace_ = ns.empty() ? (config_.namespace_.empty() ? "default" : config_.namespace_) : ns;
  auto reply = Rpc<proto::NamedActorMsg>(MsgType::kGetNamedActor, m, MsgType::kGetNamedActorReply);
  if (reply.actor_id.empty()) return ActorId();
  return ActorId(UniqueId::FromBinary(reply.actor_id));
}

// ------------------------------------------------------------------ control RPCs

template <typename Reply, typename Meta>
Reply Runtime::Rpc(MsgType type, Meta meta, MsgType reply_type, int timeout_ms) {
  return RpcWithPayload<Reply>(type, std::move(meta), std::string(), reply_type, timeout_ms, false);
}

template <typename Reply, typename Meta>
Reply Runtime::RpcWithPayload(MsgType type, Meta meta, const std::string& payload,
                              MsgType reply_type, int timeout_ms, bool has_payload) {
  meta.request_id = next_request_++;
  meta.reply_to = address();
  uint64_t id = meta.request_id;
  {
    MutexLock lock(&rpc_mu_);
    rpc_replies_[id] = nullptr;
  }
  // Resent every second until answered: a request sent just as the head died is lost with
  // its connection, and the head's handlers are idempotent, so a resend never acts twice.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool done = false;
  Status sent = Status::Ok();
  while (!done && std::chrono::steady_clock::now() < deadline) {
    sent = transport::TrySend(head_address_, type, meta, has_payload ? &payload : nullptr);
    MutexLock lock(&rpc_mu_);
    auto wake = std::min(
        deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(kRpcResendMs));
    bool woken = true;
    while (rpc_replies_[id] == nullptr && woken) woken = rpc_cv_.WaitUntil(&rpc_mu_, wake);
    done = rpc_replies_[id] != nullptr;
  }
  std::shared_ptr<transport::Envelope> env;
  {
    // A reply that comes after the last wait is dropped with the entry, as one after the
    // deadline always is: `done` decides.
    MutexLock lock(&rpc_mu_);
    env = rpc_replies_[id];
    rpc_replies_.erase(id);
  }
  if (!done) {
    throw ConnectionError(std::string("the head at ") + head_address_ + " did not answer " +
                          proto::TypeName(type) + " within " + std::to_string(timeout_ms / 1000.0) +
                          " s" + (sent.ok() ? std::string() : " (" + sent.message() + ")"));
  }
  Reply reply;
  if (env->type != reply_type) {
    throw Error(std::string("the head answered ") + proto::TypeName(type) + " with " +
                proto::TypeName(env->type));
  }
  Status s = env->Decode(&reply);
  if (!s.ok()) throw Error("bad reply from the head: " + s.message());
  return reply;
}

void Runtime::CompleteRpc(uint64_t request_id, transport::Envelope& env) {
  {
    MutexLock lock(&rpc_mu_);
    auto it = rpc_replies_.find(request_id);
    if (it == rpc_replies_.end()) return;  // the caller gave up
    it->second = std::make_shared<transport::Envelope>(std::move(env));
  }
  rpc_cv_.NotifyAll();
}

proto::PlacementGroupReplyMsg Runtime::PlacementGroupRpc(MsgType type, proto::PlacementGroupMsg msg,
                                                         int timeout_ms) {
  return Rpc<proto::PlacementGroupReplyMsg>(type, msg, MsgType::kPlacementGroupReply, timeout_ms);
}

Status Runtime::PutRecord(const proto::RecordMsg& record, int timeout_ms) {
  try {
    auto ack = Rpc<proto::AckMsg>(MsgType::kPutRecord, record, MsgType::kAck, timeout_ms);
    return ack.ok ? Status::Ok() : Status::InvalidArgument(ack.message);
  } catch (const Error& e) {
    return Status::Unavailable(e.what());
  }
}

void Runtime::RemovePlacementGroup(const PlacementGroupId& id) {
  proto::PlacementGroupMsg m;
  m.pg_id = id.Binary();
  transport::Send(head_address_, MsgType::kRemovePlacementGroup, m);  // no reply_to: no ack
}

std::vector<proto::NodeInfoMsg> Runtime::ClusterInfo() {
  auto reply = Rpc<proto::ClusterInfoMsg>(MsgType::kGetClusterInfo, proto::ClusterInfoMsg{},
                                          MsgType::kClusterInfoReply);
  return reply.nodes;
}

}  // namespace orrery::runtime
