// The runtime's objects (runtime.h): return values, Put/Get/Wait, and the values this
// process owns, sent to the peers that ask for them.
#include "actors/src/errors_util.h"
#include "actors/src/runtime.h"
#include "orrery/errors.h"

namespace orrery::runtime {

using proto::MsgType;

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

std::shared_ptr<const std::string> Runtime::Get(const internal::RefHolder& ref, int timeout_ms) {
  auto presence = store_.Lookup(ref.id());
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
  return r->bytes;
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
  return store_.Wait(ids, num_returns, timeout_ms);
}

void Runtime::OnGetObject(const proto::GetObjectMsg& m) {
  ObjectId id(UniqueId::FromBinary(m.object_id));
  std::string reply_to = m.reply_to;
  auto send = [&outbox = outbox_, reply_to, oid = m.object_id](const ObjectValue& v) {
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
    outbox.Send(reply_to, MsgType::kObjectReply, r, v.bytes ? v.bytes.get() : &empty);
  };
  if (store_.Lookup(id) == ObjectStore::Presence::kAbsent) {
    send(ObjectValue{
        nullptr, std::make_shared<const ObjectError>(ObjectError{
                     proto::ErrorKind::kError, "",
                     "object " + id.Hex() + " is no longer held by its owner", "", self_.where})});
    return;
  }
  store_.Pin(id);
  store_.OnReady(id, send);
}

void Runtime::OnObjectReply(transport::Envelope& env) {
  auto r = env.DecodeOrThrow<proto::ReplyMsg>();
  ObjectId id(UniqueId::FromBinary(r.object_id));
  if (r.ok) {
    store_.PutValue(id, std::make_shared<const std::string>(env.PayloadString()));
  } else {
    store_.PutError(id, ObjectError{r.error_kind, r.error_type, r.message, r.function, r.where});
  }
}

}  // namespace orrery::runtime
