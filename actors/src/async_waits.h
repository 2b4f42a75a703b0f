// What a suspended async call waits for (docs/api.md "Async actors"): a co_await of refs
// resumes the coroutine once enough of them are ready, at its timeout, or when its call is
// cancelled, whichever comes first (AsyncWait::Fire, once). The Runtime keeps them by call
// (runtime_async.cc); AsyncTimers fires those with a timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include "core/internal/thread_annotations.h"

namespace orrery::runtime {

struct AsyncWait {
  std::atomic<int> remaining{0};  // refs still to become ready
  std::atomic<bool> fired{false};
  std::function<void()> resume;  // posts the coroutine's resumption to its actor's thread
  // Resumes the coroutine, the first time only.
  void Fire() {
    if (fired.exchange(true)) return;
    auto r = std::move(resume);
    r();
  }
};

// Fires waits at their deadlines, from a thread of its own, started by the first.
class AsyncTimers {
 public:
  using Clock = std::chrono::steady_clock;
  AsyncTimers() = default;
  ~AsyncTimers();
  AsyncTimers(const AsyncTimers&) = delete;
  AsyncTimers& operator=(const AsyncTimers&) = delete;
  void Add(Clock::time_point at, std::weak_ptr<AsyncWait> wait) EXCLUDES(mu_);

 private:
  void Main() EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;
  std::multimap<Clock::time_point, std::weak_ptr<AsyncWait>> due_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_ GUARDED_BY(mu_);
};

}  // namespace orrery::runtime
