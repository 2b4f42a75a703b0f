// The runtime's objects (runtime.h): return values, Put/Get/Wait, fetching values from their
// owners, and resolving a call's ObjectRef arguments before it is sent.
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

void Runtime::EnsureFetch(const internal::RefHolder& ref) {
  if (ref.owner() == address() || ref.owner().empty()) return;
  if (store_.MarkPending(ref.id())) {
    transport::Send(ref.owner(), MsgType::kGetObject,
                    proto::GetObjectMsg{ref.id().Binary(), address()});
  }
}

std::shared_ptr<const std::string> Runtime::Get(const internal::RefHolder& ref, int timeout_ms) {
  auto presence = store_.Lookup(ref.id());
  if (presence == ObjectStore::Presence::kAbsent ||
      presence == ObjectStore::Presence::kReferenced) {
    if (ref.owner() == address()) {
      throw Error("object " + ref.id().Hex() +
                  " is not available: no value was produced or it was freed");
    }
    EnsureFetch(ref);
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
      EnsureFetch(*r);
    ids.push_back(r->id());
  }
  return store_.Wait(ids, num_returns, timeout_ms);
}

std::string Runtime::PackArgs(const std::vector<internal::ArgSlot>& slots) {
  std::string out;
  size_t total = 8;
  for (const auto& s : slots) total += s.bytes.size();
  out.reserve(total);
  internal::StringWriter w{out};
  msgpack::packer<internal::StringWriter> pk(w);
  pk.pack_array(uint32_t(slots.size()));
  for (const auto& s : slots) out.append(s.bytes);
  return out;
}

void Runtime::Resolve(const std::shared_ptr<PendingCall>& call, std::function<void()> ready) {
  int refs = 0;
  for (const auto& s : call->slots) refs += s.ref != nullptr;
  if (refs == 0) {
    call->args = PackArgs(call->slots);
    call->slots.clear();
    ready();
    return;
  }
  auto remaining = std::make_shared<std::atomic<int>>(refs + 1);
  // Serialises the callbacks' writes of dep_error (several arguments may fail at once); the
  // read in `finish` needs no lock, the countdown orders it after every write.
  auto error_mu = std::make_shared<Mutex>();
  auto finish = [call, remaining, ready, error_mu]() {
    if (remaining->fetch_sub(1) != 1) return;
    if (!call->dep_error) call->args = PackArgs(call->slots);
    call->slots.clear();
    ready();
  };
  for (size_t i = 0; i < call->slots.size(); ++i) {
    auto& slot = call->slots[i];
    if (!slot.ref) continue;
    EnsureFetch(*slot.ref);
    store_.OnReady(slot.ref->id(), [call, i, finish, error_mu](const ObjectValue& v) {
      if (v.bytes) {
        call->slots[i].bytes = *v.bytes;
      } else {
        MutexLock lock(error_mu.get());
        if (!call->dep_error) call->dep_error = v.error;
      }
      finish();
    });
  }
  finish();
}

void Runtime::FailCall(const PendingCall& call, const ObjectError& error) {
  store_.PutError(call.return_id, error);
}

}  // namespace orrery::runtime
