#include "actors/src/async_calls.h"

#include <utility>

#include "actors/src/errors_util.h"
#include "core/internal/kept_memory.h"

namespace orrery::runtime {

// What an async call keeps while it is in flight.
struct AsyncCalls::Call {
  explicit Call(CallCounter& counter) : counted(counter) {}
  std::shared_ptr<proto::CallMsg> msg;
  std::shared_ptr<std::string> args;
  CallResult stored;
  msgpack::object_handle unpacked;
  ResolvedArgs resolved;  // store-kept arguments, mapped while it runs
  std::atomic<bool> ended{false};
  CountedCall counted;
};

void AsyncCalls::Start(const internal::FunctionEntry& entry, void* instance,
                       std::shared_ptr<proto::CallMsg> call, std::shared_ptr<std::string> args) {
  ObjectId id(UniqueId::FromBinary(call->object_id));
  Runtime& rt = *Current();
  if (!rt.BeginCall(id)) {
    hooks_.reply(*call, false, proto::ErrorKind::kTaskCancelledError, "",
                 "'" + call->function + "' was cancelled by its caller before it started", nullptr,
                 nullptr);
    rt.NoteCallFreed(id);
    hooks_.ended(*call);
    return;
  }
  auto c = std::make_shared<Call>(counter_);
  c->stored = CallResult{id, call->reply_to};
  c->stored.async = true;
  c->msg = std::move(call);
  c->args = std::move(args);
  ++in_flight_;
  // Runs once: when the coroutine ends, or when it could not start.
  auto done = [this, c](std::string result, std::exception_ptr error) {
    if (!c->ended.exchange(true)) End(*c, error ? nullptr : &result, error);
  };
  try {
    c->unpacked =
        internal::UnpackUntrusted(c->args->data(), c->args->size(), internal::kValueUnpackLimits);
    internal::ScopedUnpackKeeper keeper(c->args->data(), c->args->size(), c->args);
    // The arguments' keepers go on this thread, before `keeper`, whichever thread ends the call.
    struct DropKeepers {
      ResolvedArgs& args;
      ~DropKeepers() { args.DropKeepers(); }
    } drop{c->resolved};
    ResolveObjectArgs(rt, c->unpacked.get(), &c->resolved);
    ScopedCallResult scope(&c->stored);
    entry.async_invoke(instance, c->unpacked.get(), done);
  } catch (...) {
    done(std::string(), std::current_exception());
  }
}

void AsyncCalls::End(Call& c, std::string* result, std::exception_ptr error) {
  const proto::CallMsg& call = *c.msg;
  c.resolved.ReleaseValues();  // before the reply, as a plain call does (worker.cc Execute)
  internal::ReclaimLandings();
  if (error) {
    CallFailure f = FailureOf(error);
    hooks_.reply(call, false, f.kind, f.type, f.message, nullptr, nullptr);
  } else {
    c.counted.ok = true;
    hooks_.reply(call, true, proto::ErrorKind::kNone, "", "", result, &c.stored);
  }
  Runtime& rt = *Current();
  rt.EndCall(c.stored.id);
  rt.NoteCallFreed(c.stored.id);
  --in_flight_;  // before `ended`, which lets the next call start
  hooks_.ended(call);
}

}  // namespace orrery::runtime
