#include "actors/src/arg_resolver.h"

#include <atomic>

#include "core/internal/thread_annotations.h"

namespace orrery::runtime {

using proto::MsgType;

void ArgResolver::EnsureFetch(const internal::RefHolder& ref) {
  if (ref.owner() == self_.address || ref.owner().empty()) return;
  if (store_.MarkPending(ref.id())) {
    outbox_.Send(ref.owner(), MsgType::kGetObject,
                 proto::GetObjectMsg{ref.id().Binary(), self_.address});
  }
}

std::string ArgResolver::PackArgs(const std::vector<internal::ArgSlot>& slots) {
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

namespace {
// A store-kept value passed by reference: an ObjectArgMsg in a msgpack ext.
std::string PackObjectArg(const internal::RefHolder& ref, const proto::ObjectLocationMsg& loc) {
  std::string body = internal::Pack(proto::ObjectArgMsg{ref.id().Binary(), ref.owner(), loc});
  std::string out;
  internal::StringWriter w{out};
  msgpack::packer<internal::StringWriter> pk(w);
  pk.pack_ext(body.size(), proto::kObjectArgExt);
  pk.pack_ext_body(body.data(), body.size());
  return out;
}
}  // namespace

void ArgResolver::Resolve(const std::shared_ptr<PendingCall>& call, std::function<void()> ready) {
  int refs = 0;
  for (auto& s : call->slots) {
    refs += s.ref != nullptr;
    if (s.ref) call->arg_refs.push_back(s.ref);
    // Refs packed inside an argument: kept, like the arguments' own, until the call is done.
    for (auto& c : s.contained) call->arg_refs.push_back(std::move(c));
    s.contained.clear();
  }
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
      } else if (v.location) {
        call->slots[i].bytes = PackObjectArg(*call->slots[i].ref, *v.location);
      } else {
        MutexLock lock(error_mu.get());
        if (!call->dep_error) call->dep_error = v.error;
      }
      finish();
    });
  }
  finish();
}

}  // namespace orrery::runtime
