// Async calls (async_waits.h; docs/api.md "Async actors"): a coroutine of an async actor
// method that co_awaits refs is suspended here and resumed on its actor's call loop (the
// worker's poster) once enough of them are ready, at its timeout, or when its call is
// cancelled.
#include <pthread.h>

#include "actors/internal/runtime.h"
#include "actors/src/async_waits.h"
#include "orrery/errors.h"

namespace orrery::runtime {

AsyncTimers::~AsyncTimers() {
  std::thread t;
  {
    MutexLock lock(&mu_);
    stop_ = true;
    t = std::move(thread_);
  }
  cv_.NotifyAll();
  if (t.joinable()) t.join();
}

void AsyncTimers::Add(Clock::time_point at, std::weak_ptr<AsyncWait> wait) {
  MutexLock lock(&mu_);
  due_.emplace(at, std::move(wait));
  if (!thread_.joinable()) thread_ = std::thread([this] { Main(); });
  cv_.NotifyAll();
}

void AsyncTimers::Main() {
  pthread_setname_np(pthread_self(), "orrery-timers");
  MutexLock lock(&mu_);
  while (!stop_) {
    if (due_.empty()) {
      cv_.Wait(&mu_);
      continue;
    }
    auto first = due_.begin();
    if (first->first > Clock::now()) {
      cv_.WaitUntil(&mu_, first->first);
      continue;
    }
    std::shared_ptr<AsyncWait> wait = first->second.lock();
    due_.erase(first);
    if (wait) wait->Fire();  // posts: never runs the coroutine on this thread
  }
}

void Runtime::SetAsyncPoster(std::function<void(std::function<void()>)> post) {
  async_post_ = std::move(post);
}

void Runtime::SuspendUntilReady(std::vector<std::shared_ptr<internal::RefHolder>> refs,
                                int num_returns, int timeout_ms, std::coroutine_handle<> h) {
  CallResult* call = CurrentCallResult();
  if (call == nullptr || !async_post_) {
    throw Error(
        "co_await of an ObjectRef works only in an async actor method (one returning "
        "orrery::Async) running in its actor");
  }
  auto wait = std::make_shared<AsyncWait>();
  wait->remaining = num_returns;
  wait->resume = [post = async_post_, call, h] {
    post([call, h] {
      ScopedCallResult scope(call);  // RuntimeContext, stored results: the call's again
      h.resume();
    });
  };
  {
    MutexLock lock(&async_mu_);
    async_waits_[call->id].push_back(wait);
    if (timeout_ms >= 0 && num_returns > 0) {
      if (!async_timers_) async_timers_ = std::make_unique<AsyncTimers>();
      async_timers_->Add(AsyncTimers::Clock::now() + std::chrono::milliseconds(timeout_ms), wait);
    }
  }
  if (num_returns <= 0 || IsCallCancelled(call->id)) return wait->Fire();
  for (const auto& r : refs) {
    auto presence = store_.Lookup(r->id());
    if (presence == ObjectStore::Presence::kAbsent ||
        presence == ObjectStore::Presence::kReferenced)
      resolver_.EnsureFetch(*r);
    store_.OnReady(r->id(), [wait](const ObjectValue&) {
      if (wait->remaining.fetch_sub(1) == 1) wait->Fire();
    });
  }
}

void Runtime::WakeAsyncWaits(const ObjectId& call) {
  std::vector<std::shared_ptr<AsyncWait>> waits;
  {
    MutexLock lock(&async_mu_);
    auto it = async_waits_.find(call);
    if (it == async_waits_.end()) return;
    waits = it->second;
  }
  for (const auto& w : waits) w->Fire();
}

void Runtime::EndAsyncWaits(const ObjectId& call) {
  MutexLock lock(&async_mu_);
  async_waits_.erase(call);
}

bool Runtime::RefReady(const internal::RefHolder& ref) {
  return store_.Lookup(ref.id()) == ObjectStore::Presence::kReady;
}

void Runtime::ThrowIfAsyncCallCancelled() {
  CallResult* call = CurrentCallResult();
  if (call != nullptr && IsCallCancelled(call->id))
    throw TaskCancelledError("the call was cancelled by its caller while it waited");
}

}  // namespace orrery::runtime

namespace orrery::internal {

void SuspendUntilReady(std::vector<std::shared_ptr<RefHolder>> refs, int num_returns,
                       int timeout_ms, std::coroutine_handle<> h) {
  runtime::CurrentOrThrow().SuspendUntilReady(std::move(refs), num_returns, timeout_ms, h);
}

void ThrowIfAsyncCallCancelled() { runtime::CurrentOrThrow().ThrowIfAsyncCallCancelled(); }

bool RefReady(const RefHolder& ref) { return runtime::CurrentOrThrow().RefReady(ref); }

}  // namespace orrery::internal
