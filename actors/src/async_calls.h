// An actor's async calls (methods returning orrery::Async; docs/api.md "Async actors"), as
// its worker runs them: each starts on the actor's call loop and runs there until it first
// suspends (a co_await of refs that are not ready); its resumptions are posted to the same
// loop (Runtime::SuspendUntilReady). At most `limit` are in flight, suspended or not; they
// hold no slot of the actor.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "actors/internal/runtime.h"
#include "core/internal/call_stats.h"
#include "core/internal/protocol.h"
#include "orrery/api/registry.h"

namespace orrery::runtime {

class AsyncCalls {
 public:
  // What the worker does for them: send a call's reply (as WorkerServer::Reply), and learn
  // that a call has ended (its caller's order moves on, a waiting call may start).
  struct Hooks {
    std::function<void(const proto::CallMsg& call, bool ok, proto::ErrorKind kind,
                       const std::string& type, const std::string& message,
                       const std::string* result, const CallResult* stored)>
        reply;
    std::function<void(const proto::CallMsg& call)> ended;
  };
  AsyncCalls(int limit, CallCounter& counter, Hooks hooks)
      : limit_(limit), counter_(counter), hooks_(std::move(hooks)) {}

  // Whether `call` is an actor call of `entry` (what it names; null: nothing registered), an
  // async method.
  static bool IsAsync(const proto::CallMsg& call, const internal::FunctionEntry* entry) {
    return entry && !call.actor_id.empty() && entry->async_invoke;
  }
  // Whether `limit` calls are in flight: the next waits for one to end.
  bool Full() const { return in_flight_.load() >= limit_; }
  // Starts `call` (of the async method `entry` on `instance`), or answers it when its caller
  // cancelled it already. Its arguments are unpacked here; an error doing so ends it at once.
  void Start(const internal::FunctionEntry& entry, void* instance,
             std::shared_ptr<proto::CallMsg> call, std::shared_ptr<std::string> args);

 private:
  struct Call;
  void End(Call& c, std::string* result, std::exception_ptr error);

  const int limit_;
  CallCounter& counter_;
  Hooks hooks_;
  std::atomic<int> in_flight_{0};
};

}  // namespace orrery::runtime
