#include "actors/internal/runtime.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>

#include "actors/src/errors_util.h"
#include "core/internal/advertised_host.h"
#include "core/internal/clock.h"
#include "core/internal/log.h"
#include "core/internal/runtime_env.h"
#include "orrery/errors.h"
#include "orrery/resources.h"

namespace orrery::runtime {

using proto::MsgType;

namespace {
std::atomic<Runtime*> g_current{nullptr};

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
Runtime& CurrentOrThrow() {
  Runtime* rt = Current();
  if (!rt) throw Error("orrery::Init() has not been called");
  return *rt;
}
void SetCurrent(Runtime* r) { g_current.store(r, std::memory_order_release); }

Runtime::Runtime(Config config, std::string head_address, JobId job, std::string where)
    : config_(std::move(config)),
      self_{std::string(), job, std::move(where), SelfCommandLine(), std::string(), std::string()},
      outbox_(TransportOutbox()),
      objects_(std::make_shared<ObjectClient>(outbox_)),
      head_(outbox_, std::move(head_address)),
      resolver_(store_, outbox_, self_),
      actors_(self_, outbox_, head_, store_, resolver_),
      tasks_(self_, config_, outbox_, head_, store_, resolver_,
             [this](int period_ms) { inbox_.SetTickPeriod(period_ms); }),
      job_(self_, config_, head_) {
  // Runs on whichever thread drops an owned value's last ref: every copy in the stores goes.
  store_.SetCompletionHook(
      [this](const ObjectId& id, const ObjectValue& v) { task_table_.Resolved(id, v); });
  store_.SetFreeHook(
      [objects = objects_](const ObjectId& id, const proto::ObjectLocationMsg& location) {
        objects->Free(id, location);
      });
  // Runs on whichever thread starts or ends this process's hold on another's object.
  store_.SetBorrowHook([this](const ObjectId& id, const std::string& owner, int delta) {
    outbox_.Send(owner, MsgType::kBorrow, proto::BorrowMsg{id.Binary(), address(), delta});
  });
}

Runtime::~Runtime() { Stop(); }

Result<std::string> AdvertiseAddressFromEnv() {
  const char* value = std::getenv("ORRERY_ADVERTISE_ADDRESS");
  if (!value || !*value) return std::string();
  if (Status s = text::CheckAdvertisedHost(value); !s.ok())
    return Status::InvalidArgument("ORRERY_ADVERTISE_ADDRESS: " + s.message());
  return std::string(value);
}

Status Runtime::Start(const std::string& bind_host, const std::string& advertise_host) {
  internal::KeepFreedMemory();  // given back once idle (Tick) and when it stops
  inbox_.SetMaxMessageBytes(config_.max_message_bytes);
  Status s = inbox_.Bind(bind_host, 0, advertise_host);
  if (!s.ok()) return s;
  self_.address = inbox_.address();
  objects_->SetSelf(self_.address);
  head_.SetReplyTo(self_.address);
  // Ticks return idle task leases; they run often only while this process holds leases.
  inbox_.SetTick(TaskSubmitter::kIdleTickMs, [this] { Tick(); });
  inbox_.Start([this](transport::Envelope& env) { return Handle(env); }, "orrery-rt");
  return Status::Ok();
}

void Runtime::Stop() {
  tasks_.ReturnAllLeases();
  // The objects this process borrowed: their owners stop keeping them for it.
  for (const auto& [id, owner] : store_.TakeBorrowed())
    outbox_.Send(owner, MsgType::kBorrow, proto::BorrowMsg{id.Binary(), address(), -1});
  FreeOwnedObjects();
  objects_->Close();
  inbox_.Stop();
  internal::StopKeepingFreedMemory();
}

// ------------------------------------------------------------------ messages

Status Runtime::Handle(transport::Envelope& env) {
  using transport::DecodeAnd;
  switch (env.type) {
    case MsgType::kCallReply:
      return OnCallReply(env);
    case MsgType::kStreamItem:
      return OnStreamItem(env);
    case MsgType::kStreamAck:
      return DecodeAnd<proto::StreamAckMsg>(env, [this](auto& m) { OnStreamAck(m); });
    case MsgType::kActorUpdate:
      return DecodeAnd<proto::ActorUpdateMsg>(env, [this](auto& m) { actors_.OnUpdate(m); });
    case MsgType::kCallsLost:
      return DecodeAnd<proto::CallsLostMsg>(env, [this](auto& m) { actors_.OnCallsLost(m); });
    case MsgType::kLeaseReply:
      return DecodeAnd<proto::LeaseReplyMsg>(env, [this](auto& m) { tasks_.OnLeaseReply(m); });
    case MsgType::kGetObject:
      return DecodeAnd<proto::GetObjectMsg>(env, [this](auto& m) { OnGetObject(m); });
    case MsgType::kObjectReply:
      return OnObjectReply(env);
    case MsgType::kBorrow:
      return DecodeAnd<proto::BorrowMsg>(env, [this](auto& m) { OnBorrow(m); });
    case MsgType::kCancel:
      return DecodeAnd<proto::CancelMsg>(env, [this](auto& m) { OnCancel(m); });
    case MsgType::kLogBatch:
      return DecodeAnd<proto::LogBatchMsg>(env, [this](auto& m) { PrintLogs(m); });
    case MsgType::kListTasks:
      return DecodeAnd<proto::ListTasksMsg>(env, [this](auto& m) { OnListTasks(m); });
    case MsgType::kObjectStoreReply:
      return DecodeAnd<proto::ObjectStoreReplyMsg>(env, [this](auto& m) { objects_->OnReply(m); });
    case MsgType::kAck:
    case MsgType::kGetNamedActorReply:
    case MsgType::kClusterInfoReply:
    case MsgType::kPlacementGroupReply:
      head_.Complete(env);
      return Status::Ok();
    case MsgType::kError: {
      proto::ErrorMsg m;
      (void)env.Decode(&m);
      LOG_WARN("a peer rejected a message from " + address() + ": " + m.message);
      return Status::Ok();
    }
    case MsgType::kPong:
      return DecodeAnd<proto::PingMsg>(env, [this](auto& m) {
        MutexLock lock(&watch_mu_);
        borrowers_.OnPong(m.request_id);
      });
    case MsgType::kPing:
      return DecodeAnd<proto::PingMsg>(env, [this](auto& m) {
        if (!m.reply_to.empty()) outbox_.Send(m.reply_to, MsgType::kPong, m);
      });
    default:
      if (extra_) {
        if (auto handled = extra_(env)) return *handled;
      }
      return Status::InvalidArgument(std::string("unexpected message ") +
                                     proto::TypeName(env.type));
  }
}

void Runtime::OnListTasks(const proto::ListTasksMsg& m) {
  if (m.reply_to.empty()) return;
  proto::ListTasksReplyMsg reply = task_table_.List();
  reply.request_id = m.request_id;
  reply.job_id = self_.job.Hex();
  outbox_.Send(m.reply_to, MsgType::kListTasksReply, reply);
}

Status Runtime::OnCallReply(transport::Envelope& env) {
  proto::ReplyMsg r;
  if (Status s = env.Decode(&r); !s.ok()) return s;
  ObjectId id(UniqueId::FromBinary(r.object_id));
  LOG_DEBUG("reply " + r.function + " " + id.Hex().substr(0, 8) + (r.ok ? " ok" : " error"));
  if (!r.actor_id.empty()) {
    actors_.OnReply(ActorId(UniqueId::FromBinary(r.actor_id)), r.seq);
  } else if (!r.lease_id.empty()) {
    tasks_.OnReply(r.lease_id, id);
  }
  if (r.ok) KeepReplyRefs(id, r.contained);
  if (r.ok && !r.location.empty()) {
    store_.PutLocation(id, std::move(r.location), /*owned=*/true);  // the caller owns results
  } else if (r.ok) {
    store_.PutValue(id, std::make_shared<const std::string>(env.PayloadString()));
  } else {
    store_.PutError(id, ObjectError{r.error_kind, r.error_type, r.message, r.function, r.where});
  }
  return Status::Ok();
}

void Runtime::Tick() {
  double now = MonotonicSeconds();
  tasks_.ReturnIdleLeases(now);
  tasks_.ResendLeaseRequests(now);
  head_.ResendUnacknowledged(now);
  store_.ReleaseExpired(now);
  actors_.Tick(now);
  WatchBorrowers(now);
  SweepStreams();
  kept_memory_.Tick(now);
}

void Runtime::WatchBorrowers(double now) {
  std::vector<std::string> dead;
  {
    MutexLock lock(&watch_mu_);
    if (!borrowers_.Due(now)) return;
    for (const auto& ping : borrowers_.Tick(now, store_.Borrowers(), &dead))
      outbox_.Send(ping.address, MsgType::kPing, proto::PingMsg{ping.request_id, address()});
  }
  for (const auto& borrower : dead) {
    LOG_INFO("ending the borrows of " + borrower +
             ": it is gone (nothing listens there, or no answer for " +
             std::to_string(int(kBorrowerDeadS)) + " s)");
    store_.DropBorrower(borrower);
  }
}

// ------------------------------------------------------------------ jobs and the head

void Runtime::RegisterJob() { job_.Register(); }

void Runtime::EndJob(int timeout_ms) { job_.End(timeout_ms); }

Status Runtime::PutRecord(const proto::RecordMsg& record, int timeout_ms) {
  return head_.PutRecord(record, timeout_ms);
}

proto::PlacementGroupReplyMsg Runtime::PlacementGroupRpc(MsgType type, proto::PlacementGroupMsg msg,
                                                         int timeout_ms) {
  return head_.PlacementGroup(type, std::move(msg), timeout_ms);
}

void Runtime::RemovePlacementGroup(const PlacementGroupId& id) { head_.RemovePlacementGroup(id); }

std::vector<proto::NodeInfoMsg> Runtime::ClusterInfo() { return head_.ClusterInfo(); }
std::vector<proto::AutoscalerGroupMsg> Runtime::AutoscalerGroups() {
  return head_.FullClusterInfo().autoscaler_groups;
}

std::string Runtime::NamespaceOr(const std::string& given) const {
  if (!given.empty()) return given;
  return config_.namespace_.empty() ? "default" : config_.namespace_;
}

ActorId Runtime::GetNamedActor(const std::string& name, const std::string& ns) {
  proto::NamedActorMsg m;
  m.name = name;
  m.namespace_ = NamespaceOr(ns);
  auto reply = head_.GetNamedActor(std::move(m));
  if (reply.actor_id.empty()) return ActorId();
  return ActorId(UniqueId::FromBinary(reply.actor_id));
}

// ------------------------------------------------------------------ submissions

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

std::shared_ptr<PendingCall> Runtime::NewCall(const std::string& function,
                                              std::vector<internal::ArgSlot> args,
                                              std::shared_ptr<internal::RefHolder>* ref) {
  auto call = std::make_shared<PendingCall>();
  *ref = NewReturn(&call->return_id);
  call->function = function;
  call->slots = std::move(args);
  return call;
}

void Runtime::CheckRuntimeEnv(internal::CallOptions& o, const std::string& what) {
  RuntimeEnv& env = o.runtime_env;
  bool job_default = env.empty();
  if (job_default) env = config_.runtime_env;
  if (!env.working_dir.empty()) {
    auto folder = runtime_env::LocalFolder(env.working_dir);
    if (!folder.ok())
      throw ConfigError(what + ": runtime env: working_dir " + folder.status().message());
    env.working_dir = folder.value();
  }
  Status s = runtime_env::Check(runtime_env::MsgOf(env));
  if (!s.ok()) throw ConfigError(what + ": " + s.message());
  // In a cluster (this process names its executable by hash), nodes on other hosts get the
  // folder from the head.
  if (!env.working_dir.empty() && !self_.binary_hash.empty()) {
    WorkingDirs::Package p = working_dirs_.Ship(env.working_dir, what, job_default);
    o.working_dir_hash = p.hash;
    o.working_dir_id = p.id;
  }
}

std::shared_ptr<internal::RefHolder> Runtime::SubmitTask(const std::string& function,
                                                         std::vector<internal::ArgSlot> args,
                                                         const internal::CallOptions& options) {
  internal::CallOptions o = options;
  if (!o.resources_set) o.resources = {{"CPU", 1}};
  Status s = ValidateResources(o.resources);
  if (!s.ok()) throw ConfigError("task " + function + ": " + s.message());
  CheckTpuAmount(o.resources, "task " + function);
  CheckRuntimeEnv(o, "task " + function);
  if (o.bundle_index >= 0 && o.placement_group.IsNil()) {
    throw ConfigError("task " + function + ": a bundle index needs a placement group");
  }
  std::shared_ptr<internal::RefHolder> ref;
  auto call = NewCall(function, std::move(args), &ref);
  task_table_.Submitted(ref->id(), function, nullptr);
  tasks_.Submit(o, std::move(call));
  return ref;
}

std::shared_ptr<internal::RefHolder> Runtime::SubmitActorTask(const ActorId& actor,
                                                              const std::string& method,
                                                              std::vector<internal::ArgSlot> args) {
  actors_.CheckPending(actor, ActorSubmitter::ArgBytes(args));  // throws: nothing submitted
  std::shared_ptr<internal::RefHolder> ref;
  auto call = NewCall(method, std::move(args), &ref);
  task_table_.Submitted(ref->id(), method, &actor);
  actors_.Submit(actor, std::move(call));
  return ref;
}

proto::CreateActorMsg Runtime::ActorSpec(const ActorId& id, const std::string& factory,
                                         std::vector<internal::ArgSlot> args,
                                         const internal::CallOptions& options) const {
  proto::CreateActorMsg m;
  m.spec.actor_id = id.Binary();
  m.spec.job_id = self_.job.Binary();
  m.spec.factory = factory;
  m.spec.args = ArgResolver::PackArgs(args);
  m.spec.owner = self_.address;
  auto& o = m.spec.options;
  o.resources = options.resources;
  o.label_selector = options.label_selector;
  o.name = options.name;
  o.namespace_ = NamespaceOr(options.namespace_);
  o.max_restarts = options.max_restarts;
  o.max_task_retries = options.max_task_retries;
  o.max_concurrency = options.max_concurrency;
  o.max_async_calls =
      options.max_concurrency_set ? options.max_concurrency : proto::kDefaultAsyncCalls;
  o.lifetime = int(options.lifetime);
  o.placement_group =
      options.placement_group.IsNil() ? std::string() : options.placement_group.Binary();
  o.bundle_index = options.bundle_index;
  o.strategy = options.strategy;
  o.affinity_node = options.affinity_node.IsNil() ? std::string() : options.affinity_node.Binary();
  o.affinity_soft = options.affinity_soft;
  o.runtime_env =
      runtime_env::MsgOf(options.runtime_env, options.working_dir_hash, options.working_dir_id);
  m.spec.infeasible_timeout_s = config_.infeasible_timeout_s;
  m.spec.argv = self_.argv;
  m.spec.binary_hash = self_.binary_hash;
  m.spec.arch = self_.arch;
  return m;
}

ActorId Runtime::CreateActor(const std::string& factory, std::vector<internal::ArgSlot> args,
                             const internal::CallOptions& options) {
  Status s = ValidateResources(options.resources);
  if (!s.ok()) throw ConfigError("actor " + factory + ": " + s.message());
  CheckTpuAmount(options.resources, "actor " + factory);
  if (options.max_pending_calls < -1)
    throw ConfigError("actor " + factory + ": max_pending_calls must be -1 (unbounded), 0 " +
                      "(the default budget) or a positive count");
  if (options.max_concurrency < 1)
    throw ConfigError("actor " + factory + ": max_concurrency must be at least 1");
  if (options.bundle_index >= 0 && options.placement_group.IsNil()) {
    throw ConfigError("actor " + factory + ": a bundle index needs a placement group");
  }
  // Constructor arguments are resolved before the actor is scheduled, and travel inline
  // (the head keeps them with the actor's spec for its restarts): docs/objects.md.
  for (auto& slot : args) {
    // Refs inside constructor arguments: the head keeps the spec, so they are kept for as
    // long as this process lives.
    for (const auto& c : slot.contained) store_.Pin(c->id());
    if (!slot.ref) continue;
    internal::BytesView v = Get(*slot.ref, -1);
    // The refs inside a value passed by reference (known once it is there): kept too.
    store_.PinContained(slot.ref->id());
    slot.bytes.assign(v.data, v.size);
    slot.ref = nullptr;
  }
  internal::CallOptions checked = options;
  CheckRuntimeEnv(checked, "actor " + factory);
  ActorId id = ActorId::Random();
  proto::CreateActorMsg m = ActorSpec(id, factory, std::move(args), checked);
  actors_.AddOwned(id, options.lifetime == ActorLifetime::kDetached, options.max_task_retries,
                   options.max_pending_calls);
  if (m.spec.options.name.empty()) {
    // Nothing to check synchronously: creation does not wait for the head, which is sent
    // the creation until it acknowledges it. Its refusal, or any later failure, reaches the
    // caller as the actor's death (the owner is subscribed).
    head_.CreateActor(std::move(m), [this, id](const proto::AckMsg& refused) {
      proto::ActorUpdateMsg dead;
      dead.actor_id = id.Binary();
      dead.state = int(proto::ActorState::kDead);
      dead.death_kind = refused.error_kind;
      dead.death_cause = "the head refused actor " + id.Hex() + ": " + refused.message;
      actors_.OnUpdate(dead);
    });
    return id;
  }
  // A name must be unique in its namespace: the head's answer decides, now.
  auto reply = head_.CreateNamedActor(std::move(m));
  if (!reply.ok) {
    actors_.Forget(id);
    ThrowKind(reply.error_kind, reply.message);
  }
  return id;
}

void Runtime::KillActor(const ActorId& actor, bool no_restart) { actors_.Kill(actor, no_restart); }

void Runtime::KillOwnedActors() { actors_.KillOwned(); }

}  // namespace orrery::runtime
