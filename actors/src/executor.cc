#include "actors/src/executor.h"

#include <pthread.h>

namespace orrery::runtime {

Executor::Executor(int concurrency) : concurrency_(concurrency < 1 ? 1 : concurrency) {}

Executor::~Executor() { Stop(); }

void Executor::Submit(Work work) {
  {
    MutexLock lock(&mu_);
    queue_.push_back(std::move(work));
    // A thread is started when no idle one is left to take the call, up to concurrency_.
    if (idle_ < queue_.size() && threads_.size() < size_t(concurrency_) && !closed_)
      threads_.emplace_back([this] { ThreadMain(); });
  }
  cv_.NotifyOne();
}

void Executor::ThreadMain() {
  pthread_setname_np(pthread_self(), "orrery-exec");
  mu_.Lock();
  while (true) {
    // Once closed, queued calls still run before the thread ends.
    while (queue_.empty() && !closed_) {
      ++idle_;
      cv_.Wait(&mu_);
      --idle_;
    }
    if (queue_.empty()) break;  // closed and drained
    Work work = std::move(queue_.front());
    queue_.pop_front();
    mu_.Unlock();
    work();
    work = nullptr;
    mu_.Lock();
  }
  mu_.Unlock();
}

void Executor::Stop() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(&mu_);
    closed_ = true;
    threads.swap(threads_);
  }
  cv_.NotifyAll();
  for (auto& t : threads) {
    if (t.get_id() == std::this_thread::get_id()) {
      t.detach();
    } else if (t.joinable()) {
      t.join();
    }
  }
}

bool CallSlot::TryTake() {
  MutexLock lock(&mu_);
  if (held_) return false;
  held_ = true;
  return true;
}

void CallSlot::Release() {
  MutexLock lock(&mu_);
  held_ = false;
}

}  // namespace orrery::runtime
