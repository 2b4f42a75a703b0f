// The runtime's objects (runtime.h): return values, Put/Get/Wait, and the values this
// process owns, sent to the peers that ask for them.
#include <algorithm>

#include "actors/internal/runtime.h"
#include "actors/src/errors_util.h"
#include "core/internal/kept_memory.h"
#include "core/internal/log.h"
#include "core/internal/rate_limit.h"
#include "core/internal/text.h"
#include "objects/internal/object_transfer.h"
#include "orrery/api/runtime_context.h"
#include "orrery/errors.h"

namespace orrery::runtime {

using proto::MsgType;

namespace {
thread_local CallResult* t_call_result = nullptr;
thread_local internal::ScopedRefCollector* t_ref_collector = nullptr;
}  // namespace

ScopedCallResult::ScopedCallResult(CallResult* result) : previous_(t_call_result) {
  t_call_result = result;
}
ScopedCallResult::~ScopedCallResult() { t_call_result = previous_; }

CallResult* CurrentCallResult() { return t_call_result; }

std::vector<proto::ContainedRefMsg> ContainedRefs(
    const std::vector<std::shared_ptr<internal::RefHolder>>& refs) {
  std::vector<proto::ContainedRefMsg> out;
  out.reserve(std::min(refs.size(), proto::kMaxContainedRefs));
  for (const auto& r : refs) {
    if (out.size() < proto::kMaxContainedRefs) {
      out.push_back(proto::ContainedRefMsg{r->id().Binary(), r->owner()});
    } else if (Runtime* rt = Current()) {
      rt->store().Pin(r->id());
    }
  }
  return out;
}

std::shared_ptr<internal::RefHolder> Runtime::CreateObject(size_t size, char** data) {
  if (size <= internal::kInlineValueMaxBytes || !objects_->available()) return nullptr;
  ObjectId id = ObjectId::Random();
  auto region = objects_->Create(id, size, address());
  if (!region.ok()) {
    if (region.status().code() == StatusCode::kUnavailable)
      throw ObjectStoreFullError(region.status().message());
    LOG_WARN("keeping a value of " + std::to_string(size) +
             " bytes in this process: " + region.status().message());
    return nullptr;
  }
  *data = region->data;
  {
    MutexLock lock(&creating_mu_);
    creating_[id] = region->location;
  }
  return internal::MakeRef(id, address());
}

std::optional<proto::ObjectLocationMsg> Runtime::TakeCreating(const ObjectId& id) {
  MutexLock lock(&creating_mu_);
  auto it = creating_.find(id);
  if (it == creating_.end()) return std::nullopt;
  proto::ObjectLocationMsg location = std::move(it->second);
  creating_.erase(it);
  return location;
}

void Runtime::SealObject(const internal::RefHolder& ref) {
  auto location = TakeCreating(ref.id());
  if (!location) return;
  objects_->Seal(ref.id());
  store_.PutLocation(ref.id(), std::move(*location), /*owned=*/true);
}

bool Runtime::BeginStoredResult(size_t size, char** data) {
  CallResult* r = t_call_result;
  if (!r || r->stored || size <= internal::kInlineValueMaxBytes || !objects_->available())
    return false;
  auto region = objects_->Create(r->id, size, r->owner);
  if (!region.ok()) {
    if (region.status().code() == StatusCode::kUnavailable)
      throw ObjectStoreFullError(region.status().message());
    return false;
  }
  *data = region->data;
  r->stored = true;
  r->location = region->location;
  return true;
}

void Runtime::EndStoredResult() {
  if (t_call_result && t_call_result->stored) objects_->Seal(t_call_result->id);
}

void Runtime::Discard(const ObjectId& id, const proto::ObjectLocationMsg& location) {
  objects_->Seal(id);
  objects_->Free(id, location);
}

void Runtime::AbandonObject(const internal::RefHolder& ref) {
  if (auto location = TakeCreating(ref.id())) Discard(ref.id(), *location);
}

void Runtime::AbandonStoredResult() {
  CallResult* r = t_call_result;
  if (!r || !r->stored) return;
  Discard(r->id, r->location);
  r->stored = false;
  r->location = proto::ObjectLocationMsg{};
}

internal::BytesView Runtime::ReadStored(const ObjectId& id,
                                        const proto::ObjectLocationMsg& location, int timeout_ms) {
  if (objects_->available()) {
    auto mapped = objects_->Open(id, location, timeout_ms);
    if (mapped.ok()) return {(*mapped)->data(), (*mapped)->size(), *mapped};
    if (mapped.status().code() == StatusCode::kTimeout && timeout_ms >= 0)
      throw GetTimeoutError("Get timed out reading object " + id.Hex() + ": " +
                            mapped.status().message());
    throw ObjectLostError("object " + id.Hex() + " is lost: " + mapped.status().message());
  }
  // No store on this host (a driver on a machine without a node): pulled into this process.
  auto bytes = std::make_shared<std::string>(location.size, '\0');
  objects::PullOptions options;
  Status s = objects::PullObject(location.data_address, id, location.size, bytes->data(), options,
                                 objects::ProcessTransferKey());
  if (!s.ok()) {
    throw ObjectLostError("object " + id.Hex() + " could not be pulled from " +
                          location.data_address + ": " + s.message());
  }
  return {bytes->data(), bytes->size(), bytes};
}

void Runtime::FreeOwnedObjects() {
  for (const auto& [id, location] : store_.OwnedLocations()) objects_->Free(id, location);
}

void ResolveObjectArgs(Runtime& rt, const msgpack::object& args, ResolvedArgs* out) {
  if (args.type != msgpack::type::ARRAY) return;
  for (uint32_t i = 0; i < args.via.array.size; ++i) {
    msgpack::object& arg = args.via.array.ptr[i];
    if (arg.type != msgpack::type::EXT || arg.via.ext.type() != proto::kObjectArgExt) continue;
    proto::ObjectArgMsg m;
    try {
      auto oh = internal::UnpackUntrusted(arg.via.ext.data(), arg.via.ext.size,
                                          internal::kControlUnpackLimits);
      oh.get().convert(m);
    } catch (const std::exception& e) {
      throw Error(std::string("argument ") + std::to_string(i + 1) +
                  ": a malformed object reference (" + e.what() + ")");
    }
    if (m.object_id.size() != UniqueId::kSize) throw Error("an object argument with a bad id");
    ObjectId id(UniqueId::FromBinary(m.object_id));
    internal::BytesView view = rt.ReadStored(id, m.location, -1);
    out->views.push_back(view);
    out->handles.push_back(
        internal::UnpackUntrusted(view.data, view.size, internal::kValueUnpackLimits));
    out->keepers.push_back(
        std::make_unique<internal::ScopedUnpackKeeper>(view.data, view.size, view.keep));
    arg = out->handles.back().get();
  }
}

std::shared_ptr<internal::RefHolder> Runtime::NewReturn(ObjectId* id) {
  *id = ObjectId::Random();
  store_.MarkPending(*id);
  return internal::MakeRef(*id, address());
}

std::shared_ptr<internal::RefHolder> Runtime::Put(std::string bytes) {
  ObjectId id = ObjectId::Random();
  auto ref = internal::MakeRef(id, address());
  store_.PutValue(id, std::make_shared<const std::string>(std::move(bytes)));
  return ref;
}

void Runtime::SetOwnActor(const ActorId& actor, bool (*runs_its_call)()) {
  own_actor_ = actor;
  runs_its_call_.store(runs_its_call, std::memory_order_release);
}

void Runtime::ThrowIfWaitsOnOwnActor(const std::vector<ObjectId>& ids, int needed, int timeout_ms,
                                     const char* what) {
  auto runs_its_call = runs_its_call_.load(std::memory_order_acquire);
  if (timeout_ms == 0 || runs_its_call == nullptr || !runs_its_call()) return;
  std::string method;
  int others = 0;
  for (const auto& id : ids) {
    std::string function;
    // A call that ran here already has its reply on the way: only one not yet run waits
    // behind this call.
    if (store_.Lookup(id) != ObjectStore::Presence::kReady &&
        actors_.Unanswered(own_actor_, id, &function) && !FreedHere(id)) {
      method = function;
    } else {
      ++others;
    }
  }
  if (method.empty() || others >= needed) return;
  const CallResult* running = CurrentCallResult();
  if (running && running->async) {
    throw Error(std::string(what) + " would wait forever: it waits on a call to '" + method +
                "' of its own actor, and a blocking wait inside an async method holds the "
                "actor (co_await the ref instead)");
  }
  throw Error(std::string(what) + " would wait forever: it waits on a call to '" + method +
              "' of its own actor, which runs one call at a time and cannot start that call "
              "until this one returns (call the method directly, or give the actor "
              "SetMaxConcurrency(n > 1))");
}

internal::BytesView Runtime::Get(const internal::RefHolder& ref, int timeout_ms) {
  internal::ReclaimLandings();  // what the caller let go since its last call (kept_memory.h)
  auto presence = store_.Lookup(ref.id());
  if (presence != ObjectStore::Presence::kReady)
    ThrowIfWaitsOnOwnActor({ref.id()}, 1, timeout_ms, "Get");
  if (presence == ObjectStore::Presence::kAbsent ||
      presence == ObjectStore::Presence::kReferenced) {
    if (ref.owner() == address()) {
      throw Error("object " + ref.id().Hex() +
                  " is not available: no value was produced or it was freed");
    }
    resolver_.EnsureFetch(ref);
  }
  Result<ObjectValue> r = store_.Get(ref.id(), timeout_ms);
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kTimeout)
      throw GetTimeoutError("Get timed out: " + r.status().message());
    throw Error(r.status().message());
  }
  if (r->error) ThrowError(*r->error);
  if (r->bytes) return {r->bytes->data(), r->bytes->size(), r->bytes};
  return ReadStored(ref.id(), *r->location, timeout_ms);
}

std::vector<bool> Runtime::Wait(const std::vector<const internal::RefHolder*>& refs,
                                int num_returns, int timeout_ms) {
  if (num_returns < 0 || num_returns > int(refs.size())) {
    throw ConfigError("Wait: num_returns must be between 0 and the number of refs (" +
                      std::to_string(refs.size()) + ")");
  }
  std::vector<ObjectId> ids;
  for (const auto* r : refs) {
    if (!r) throw ConfigError("Wait: a null ObjectRef");
    auto presence = store_.Lookup(r->id());
    if (presence == ObjectStore::Presence::kAbsent ||
        presence == ObjectStore::Presence::kReferenced)
      resolver_.EnsureFetch(*r);
    ids.push_back(r->id());
  }
  ThrowIfWaitsOnOwnActor(ids, num_returns, timeout_ms, "Wait");
  return store_.Wait(ids, num_returns, timeout_ms);
}

void Runtime::OnGetObject(const proto::GetObjectMsg& m) {
  ObjectId id(UniqueId::FromBinary(m.object_id));
  std::string reply_to = m.reply_to;
  auto send = [&outbox = outbox_, reply_to, oid = m.object_id](const ObjectValue& v) {
    proto::ReplyMsg r;
    r.object_id = oid;
    r.ok = v.ok();
    if (v.location) r.location = *v.location;
    if (v.error) {
      r.error_kind = v.error->kind;
      r.error_type = v.error->type;
      r.message = v.error->message;
      r.function = v.error->function;
      r.where = v.error->where;
    }
    std::string empty;
    outbox.Send(reply_to, MsgType::kObjectReply, r, v.bytes ? v.bytes.get() : &empty);
  };
  if (store_.Lookup(id) == ObjectStore::Presence::kAbsent) {
    send(ObjectValue{
        nullptr, nullptr,
        std::make_shared<const ObjectError>(ObjectError{
            proto::ErrorKind::kError, "", "object " + id.Hex() + " is no longer held by its owner",
            "", self_.where})});
    return;
  }
  // The reader holds a ref, and so a borrow of its own, which may still be on its way.
  store_.MarkShared(id);
  store_.OnReady(id, send);
}

namespace {
RateLimitedLog g_borrow_log(5.0);
}  // namespace

bool PlausibleAddress(const std::string& a) {
  return !a.empty() && a.size() <= 512 && text::IsPrintableToken(a);
}

void Runtime::OnBorrow(const proto::BorrowMsg& m) {
  Status s;
  if (m.object_id.size() != UniqueId::kSize || (m.delta != 1 && m.delta != -1) ||
      !PlausibleAddress(m.borrower)) {
    s = Status::InvalidArgument("malformed borrow (object id of " +
                                std::to_string(m.object_id.size()) + " bytes, delta " +
                                std::to_string(m.delta) + ")");
  } else {
    s = store_.AddBorrower(ObjectId(UniqueId::FromBinary(m.object_id)), m.borrower, m.delta);
  }
  // A +1 that arrives after the object went (its borrower will find it lost) is no error.
  uint64_t suppressed = 0;
  if (!s.ok() && s.code() != StatusCode::kNotFound && g_borrow_log.ShouldLog(&suppressed)) {
    LOG_WARN("ignoring a borrow from " + m.borrower.substr(0, 64) + ": " + s.message() +
             (suppressed ? " (" + std::to_string(suppressed) + " more)" : ""));
  }
}

void Runtime::KeepReplyRefs(const ObjectId& result,
                            const std::vector<proto::ContainedRefMsg>& refs) {
  // Only for a call this process waits for: a reply naming another id keeps nothing.
  if (refs.empty() || store_.Lookup(result) != ObjectStore::Presence::kPending) return;
  std::vector<std::shared_ptr<const internal::RefHolder>> holders;
  holders.reserve(std::min(refs.size(), proto::kMaxContainedRefs));
  for (const auto& r : refs) {
    if (holders.size() >= proto::kMaxContainedRefs) break;
    if (r.object_id.size() != UniqueId::kSize || !PlausibleAddress(r.owner)) continue;
    holders.push_back(internal::MakeRef(ObjectId(UniqueId::FromBinary(r.object_id)), r.owner));
  }
  store_.AttachContained(result, std::move(holders));
}

Status Runtime::OnObjectReply(transport::Envelope& env) {
  proto::ReplyMsg r;
  if (Status s = env.Decode(&r); !s.ok()) return s;
  ObjectId id(UniqueId::FromBinary(r.object_id));
  if (r.ok && !r.location.empty()) {
    store_.PutLocation(id, std::move(r.location), /*owned=*/false);
  } else if (r.ok) {
    store_.PutValue(id, std::make_shared<const std::string>(env.PayloadString()));
  } else {
    store_.PutError(id, ObjectError{r.error_kind, r.error_type, r.message, r.function, r.where});
  }
  return Status::Ok();
}

}  // namespace orrery::runtime

// The public API's object operations (runtime_api.h).
namespace orrery::internal {

std::shared_ptr<RefHolder> PutBytes(std::string bytes) {
  return runtime::CurrentOrThrow().Put(std::move(bytes));
}

BytesView GetBytes(const RefHolder& ref, int timeout_ms) {
  return runtime::CurrentOrThrow().Get(ref, timeout_ms);
}

std::shared_ptr<RefHolder> CreateObject(size_t size, char** data) {
  return runtime::CurrentOrThrow().CreateObject(size, data);
}

void SealObject(const RefHolder& ref) { runtime::CurrentOrThrow().SealObject(ref); }
void AbandonObject(const RefHolder& ref) { runtime::CurrentOrThrow().AbandonObject(ref); }

// ------------------------------------------------------------------ nested refs

void RefHolder::Share() const {
  auto* rt = runtime::Current();
  if (!rt) return;
  std::shared_ptr<RefHolder> self = std::const_pointer_cast<RefHolder>(weak_from_this().lock());
  if (!runtime::t_ref_collector || !self) {
    rt->store().Pin(id_);  // nothing keeps the value it goes into: keep it while we live
    return;
  }
  runtime::t_ref_collector->Add(std::move(self));
  // An owned object that went into a value outlives its last ref here by a grace period, in
  // which a reader's borrow (its +1) may still arrive.
  if (owner_.empty() || owner_ == rt->address()) rt->store().MarkShared(id_);
}

ScopedRefCollector::ScopedRefCollector() : previous_(runtime::t_ref_collector) {
  runtime::t_ref_collector = this;
}

ScopedRefCollector::~ScopedRefCollector() { runtime::t_ref_collector = previous_; }

void ScopedRefCollector::Add(std::shared_ptr<RefHolder> ref) { refs_.push_back(std::move(ref)); }

std::vector<std::shared_ptr<RefHolder>> ScopedRefCollector::Take() {
  // Packing sizes a value before writing it: each ref was collected once per pass.
  std::sort(refs_.begin(), refs_.end());
  refs_.erase(std::unique(refs_.begin(), refs_.end()), refs_.end());
  return std::move(refs_);
}

void CancelRef(const RefHolder& ref, bool force) { runtime::CurrentOrThrow().Cancel(ref, force); }

void KeepContained(const RefHolder& value, std::vector<std::shared_ptr<RefHolder>> refs) {
  if (refs.empty()) return;
  runtime::Runtime* rt = runtime::Current();
  if (!rt) return;
  rt->store().AttachContained(value.id(), {refs.begin(), refs.end()});
}

void KeepResultRefs(std::vector<std::shared_ptr<RefHolder>> refs) {
  if (refs.empty()) return;
  runtime::CallResult* r = runtime::t_call_result;
  if (!r) {
    // Not a remote call's result: nothing names the refs to a caller.
    if (runtime::Runtime* rt = runtime::Current())
      for (const auto& ref : refs) rt->store().Pin(ref->id());
    return;
  }
  r->contained.insert(r->contained.end(), refs.begin(), refs.end());
}

bool BeginStoredResult(size_t size, char** data) {
  runtime::Runtime* rt = runtime::Current();
  return rt != nullptr && rt->BeginStoredResult(size, data);
}

void AbandonStoredResult() {
  if (runtime::Runtime* rt = runtime::Current()) rt->AbandonStoredResult();
}

void EndStoredResult() {
  if (runtime::Runtime* rt = runtime::Current()) rt->EndStoredResult();
}

}  // namespace orrery::internal

namespace orrery {

bool RuntimeContext::IsCancelled() const {
  runtime::Runtime* rt = runtime::Current();
  runtime::CallResult* call = runtime::t_call_result;
  return rt != nullptr && call != nullptr && rt->IsCallCancelled(call->id);
}

}  // namespace orrery
