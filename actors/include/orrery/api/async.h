// Async actors (docs/api.md "Async actors"): an actor method returning orrery::Async<T> is a
// C++20 coroutine that may co_await an ObjectRef<U> (giving std::shared_ptr<U>), a
// std::vector<ObjectRef<U>> (giving the values) and orrery::WaitAsync(...) (giving a
// WaitResult). While it is suspended the actor's thread runs its other calls: one thread holds
// thousands of calls in flight.
//
//   orrery::Async<int64_t> Gatherer::Sum(int n) {
//     std::vector<orrery::ObjectRef<int64_t>> refs;
//     for (int i = 0; i < n; ++i) refs.push_back(orrery::Task(Square).Remote(i));
//     int64_t sum = 0;
//     for (const auto& v : co_await refs) sum += *v;
//     co_return sum;
//   }
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "orrery/api/object_ref.h"
#include "orrery/api/runtime_api.h"
#include "orrery/errors.h"

namespace orrery {

template <typename T>
struct WaitResult {
  std::vector<ObjectRef<T>> ready;
  std::vector<ObjectRef<T>> unready;
};

namespace internal {

// Suspends the calling coroutine `h` until `num_returns` of `refs` are ready, timeout_ms
// passes (-1: no limit) or its call is cancelled; it resumes on its actor's thread.
void SuspendUntilReady(std::vector<std::shared_ptr<RefHolder>> refs, int num_returns,
                       int timeout_ms, std::coroutine_handle<> h);
// After a resumption: throws TaskCancelledError when the running call was cancelled.
void ThrowIfAsyncCallCancelled();
// Whether `ref`'s value is here (ready, or an error) without waiting.
bool RefReady(const RefHolder& ref);

template <typename U>
std::shared_ptr<U> GetValue(const ObjectRef<U>& ref);  // orrery.h: Get(ref)

template <typename U>
struct RefAwaiter {
  ObjectRef<U> ref;
  bool await_ready() const { return RefReady(*ref.Holder()); }
  void await_suspend(std::coroutine_handle<> h) const {
    SuspendUntilReady({ref.Holder()}, 1, -1, h);
  }
  std::shared_ptr<U> await_resume() const {
    ThrowIfAsyncCallCancelled();
    return GetValue(ref);
  }
};

template <typename U>
struct RefsAwaiter {
  std::vector<ObjectRef<U>> refs;
  bool await_ready() const {
    for (const auto& r : refs)
      if (!RefReady(*r.Holder())) return false;
    return true;
  }
  void await_suspend(std::coroutine_handle<> h) const {
    std::vector<std::shared_ptr<RefHolder>> holders;
    holders.reserve(refs.size());
    for (const auto& r : refs) holders.push_back(r.Holder());
    SuspendUntilReady(std::move(holders), int(refs.size()), -1, h);
  }
  std::vector<std::shared_ptr<U>> await_resume() const {
    ThrowIfAsyncCallCancelled();
    std::vector<std::shared_ptr<U>> out;
    out.reserve(refs.size());
    for (const auto& r : refs) out.push_back(GetValue(r));
    return out;
  }
};

}  // namespace internal

// co_await WaitAsync(refs, num_returns, timeout_ms): as Wait, without holding the thread.
template <typename T>
struct WaitAwaitable {
  std::vector<ObjectRef<T>> refs;
  int num_returns;
  int timeout_ms;
  bool await_ready() const {
    int ready = 0;
    for (const auto& r : refs) ready += internal::RefReady(*r.Holder()) ? 1 : 0;
    return ready >= num_returns || timeout_ms == 0;
  }
  void await_suspend(std::coroutine_handle<> h) const {
    std::vector<std::shared_ptr<internal::RefHolder>> holders;
    holders.reserve(refs.size());
    for (const auto& r : refs) holders.push_back(r.Holder());
    internal::SuspendUntilReady(std::move(holders), num_returns, timeout_ms, h);
  }
  WaitResult<T> await_resume() const {
    internal::ThrowIfAsyncCallCancelled();
    WaitResult<T> out;
    for (const auto& r : refs)
      (internal::RefReady(*r.Holder()) ? out.ready : out.unready).push_back(r);
    return out;
  }
};

template <typename T>
WaitAwaitable<T> WaitAsync(const std::vector<ObjectRef<T>>& refs, int num_returns,
                           int timeout_ms = -1) {
  if (num_returns < 0 || num_returns > int(refs.size()))
    throw ConfigError("WaitAsync: num_returns must be between 0 and the number of refs (" +
                      std::to_string(refs.size()) + ")");
  return WaitAwaitable<T>{refs, num_returns, timeout_ms};
}

namespace internal {

// What the promises of Async<T> share: how it ends, and what it may co_await.
template <typename Derived>
struct AsyncPromiseBase {
  std::exception_ptr error;
  // Runs once the coroutine has ended; the frame is destroyed after it returns.
  std::function<void()> on_done;

  std::suspend_always initial_suspend() noexcept { return {}; }
  auto final_suspend() noexcept {
    struct Final {
      bool await_ready() noexcept { return false; }
      void await_suspend(std::coroutine_handle<Derived> h) noexcept {
        auto done = std::move(h.promise().on_done);
        if (done) done();
        h.destroy();
      }
      void await_resume() noexcept {}
    };
    return Final{};
  }
  void unhandled_exception() { error = std::current_exception(); }

  template <typename U>
  RefAwaiter<U> await_transform(const ObjectRef<U>& ref) {
    return RefAwaiter<U>{ref};
  }
  template <typename U>
  RefsAwaiter<U> await_transform(const std::vector<ObjectRef<U>>& refs) {
    return RefsAwaiter<U>{refs};
  }
  template <typename U>
  WaitAwaitable<U> await_transform(WaitAwaitable<U> w) {
    return w;
  }
};

}  // namespace internal

template <typename T>
class Async;

namespace internal {

// The promise of Async<T>: what the coroutine co_returns.
template <typename T>
struct AsyncPromise : AsyncPromiseBase<AsyncPromise<T>> {
  std::optional<T> value;
  Async<T> get_return_object();
  void return_value(T v) { value.emplace(std::move(v)); }
};
template <>
struct AsyncPromise<void> : AsyncPromiseBase<AsyncPromise<void>> {
  Async<void> get_return_object();
  void return_void() {}
};

}  // namespace internal

// The result of an async actor method: a coroutine that co_returns a T. The runtime starts
// it when the call starts and replies when it ends.
template <typename T>
class Async {
 public:
  using promise_type = internal::AsyncPromise<T>;
  using Handle = std::coroutine_handle<promise_type>;

  Async(Async&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  Async(const Async&) = delete;
  Async& operator=(const Async&) = delete;
  Async& operator=(Async&&) = delete;
  ~Async() {
    if (handle_) handle_.destroy();
  }

  // Runs the coroutine until it first suspends; `done` runs once it has ended, on the thread
  // that ran its last part, with its value (unless T is void) and its error.
  template <typename Done>
  void Start(Done done) && {
    Handle h = std::exchange(handle_, nullptr);
    promise_type& p = h.promise();
    p.on_done = [&p, done = std::move(done)]() mutable {
      if constexpr (std::is_void_v<T>) {
        done(p.error);
      } else {
        done(p.value, p.error);
      }
    };
    h.resume();
  }

 private:
  friend promise_type;
  explicit Async(Handle h) : handle_(h) {}
  Handle handle_;
};

namespace internal {
template <typename T>
Async<T> AsyncPromise<T>::get_return_object() {
  return Async<T>(std::coroutine_handle<AsyncPromise<T>>::from_promise(*this));
}
inline Async<void> AsyncPromise<void>::get_return_object() {
  return Async<void>(std::coroutine_handle<AsyncPromise<void>>::from_promise(*this));
}
}  // namespace internal

namespace internal {
template <typename R>
struct IsAsync : std::false_type {};
template <typename T>
struct IsAsync<Async<T>> : std::true_type {};
template <typename R>
struct RemoteValue {
  using type = R;
};
template <typename T>
struct RemoteValue<Async<T>> {
  using type = T;
};
}  // namespace internal

}  // namespace orrery
