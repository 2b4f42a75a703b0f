// Streaming results (docs/api.md "Streaming results"): a remote function or actor method that
// returns orrery::Stream<T> is a coroutine that co_yields values; its Remote() returns an
// ObjectRefGenerator<T> whose Next() hands out each value's ref as soon as it is produced.
//
//   orrery::Stream<int> Count(int n) {
//     for (int i = 0; i < n; ++i) co_yield i;
//   }
//   ORRERY_REMOTE(Count);
//   auto gen = orrery::Task(Count).Remote(1000);
//   while (auto ref = gen.Next()) std::cout << *orrery::Get(*ref);
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include "orrery/api/object_ref.h"
#include "orrery/api/runtime_api.h"

namespace orrery {

// The producer's side: a coroutine that co_yields values of T (and ends with co_return or by
// falling off its end). Move-only. Outside Remote() it can be read in place: Next() runs it
// to its next value.
template <typename T>
class Stream {
 public:
  struct promise_type {
    std::optional<T> value;
    std::exception_ptr error;
    Stream get_return_object() {
      return Stream(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    std::suspend_always yield_value(T v) {
      value.emplace(std::move(v));
      return {};
    }
    void return_void() {}
    void unhandled_exception() { error = std::current_exception(); }
  };

  Stream(Stream&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept {
    if (this != &o) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(o.handle_, nullptr);
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (handle_) handle_.destroy();
  }

  // Runs the coroutine to its next co_yield: true with Value() set, false once it has ended.
  // Rethrows what the coroutine threw.
  bool Next() {
    if (!handle_ || handle_.done()) return false;
    handle_.promise().value.reset();
    handle_.resume();
    if (handle_.promise().error) std::rethrow_exception(std::exchange(handle_.promise().error, {}));
    return !handle_.done();
  }
  // The value of the last co_yield; valid until the next Next().
  T& Value() { return *handle_.promise().value; }

 private:
  explicit Stream(std::coroutine_handle<promise_type> h) : handle_(h) {}
  std::coroutine_handle<promise_type> handle_;
};

// The caller's side: the refs of a streaming call's values, in order. Next() waits for the
// next one and returns it as soon as the producer has yielded it; std::nullopt once the
// producer has ended and every value has been read. When the producer failed (it threw, was
// cancelled, or its process died), the Next() after its last value throws that error
// (RemoteError, TaskCancelledError, ActorDiedError, WorkerCrashedError). Past timeout_ms
// (-1: no limit) Next() throws GetTimeoutError and may be called again.
//
// The producer runs at most internal::kStreamWindow values ahead of what Next() has handed
// out, so a slow reader holds it back instead of filling memory. Dropping every copy of the
// generator before its end stops the producer. Cheap to copy; copies share one position.
// Read it from one thread at a time. It stays in the process that made the call.
template <typename T>
class ObjectRefGenerator {
 public:
  ObjectRefGenerator() = default;
  explicit ObjectRefGenerator(std::shared_ptr<internal::StreamReader> reader)
      : reader_(std::move(reader)) {}

  std::optional<ObjectRef<T>> Next(int64_t timeout_ms = -1) {
    std::shared_ptr<internal::RefHolder> item = internal::NextStreamItem(*reader_, timeout_ms);
    if (!item) return std::nullopt;
    return ObjectRef<T>(std::move(item));
  }
  // Cancels the call (as orrery::Cancel on a call's ref): the producer stops at its next
  // co_yield, and Next() throws TaskCancelledError after the values already received.
  void Cancel() { internal::CancelRef(*internal::StreamEnd(*reader_), false); }
  // The ref of the call itself: ready when the producer has ended (its value is the number
  // of values yielded), or holding its error.
  ObjectRef<uint64_t> Completion() const {
    return ObjectRef<uint64_t>(internal::StreamEnd(*reader_));
  }
  bool IsNull() const { return !reader_; }

 private:
  std::shared_ptr<internal::StreamReader> reader_;
};

template <typename T>
void Cancel(const ObjectRefGenerator<T>& generator) {
  ObjectRefGenerator<T>(generator).Cancel();
}

namespace internal {

template <typename R>
struct IsStream : std::false_type {};
template <typename T>
struct IsStream<Stream<T>> : std::true_type {};

// Inside a worker: runs a streaming call's coroutine, sending each value to the caller as it
// comes (EmitStreamItem waits while the caller is kStreamWindow values behind). `pack` packs
// one value as a call result. Returns the packed number of values: the call's own result.
template <typename T, typename PackFn>
std::string DriveStream(Stream<T> stream, PackFn pack) {
  uint64_t count = 0;
  while (stream.Next()) {
    EmitStreamItem([&] { return pack(stream.Value()); });
    ++count;
  }
  return Pack(count);
}

}  // namespace internal
}  // namespace orrery
