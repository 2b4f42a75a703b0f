#include "actors/src/executor.h"

#include <pthread.h>

#include <algorithm>

namespace orrery::runtime {

namespace {
thread_local Executor* t_executor = nullptr;
}  // namespace

Executor::Executor(int concurrency, int max_threads)
    : concurrency_(concurrency < 1 ? 1 : concurrency),
      max_threads_(std::max(max_threads, concurrency)) {
  MutexLock lock(&mu_);
  for (int i = 0; i < concurrency_; ++i) SpawnLocked();
}

Executor::~Executor() { Stop(); }

void Executor::SpawnLocked() {
  threads_.emplace_back([this] { ThreadMain(); });
}

void Executor::Submit(Work work) {
  MutexLock lock(&mu_);
  queue_.push_back(std::move(work));
  WakeOrSpawnLocked();
}

void Executor::WakeOrSpawnLocked() {
  if (!CanStartLocked()) return;
  if (idle_ > 0) {
    cv_.NotifyOne();
  } else if (int(threads_.size()) < max_threads_ && !closed_) {
    SpawnLocked();
  }
}

bool Executor::CanStartLocked() const {
  return !queue_.empty() && active_ < concurrency_ && resuming_ == 0;
}

void Executor::SlotFreedLocked() {
  if (resuming_ > 0) {
    resume_cv_.NotifyOne();
  } else {
    WakeOrSpawnLocked();
  }
}

void Executor::ThreadMain() {
  pthread_setname_np(pthread_self(), "orrery-exec");
  t_executor = this;
  mu_.Lock();
  while (true) {
    ++idle_;
    // Once closed, queued calls still run (within the limit) before the thread ends.
    while (!(CanStartLocked() || (closed_ && queue_.empty()))) cv_.Wait(&mu_);
    --idle_;
    if (!CanStartLocked()) break;  // closed and drained
    Work work = std::move(queue_.front());
    queue_.pop_front();
    ++active_;
    // A thread woken for one call may have been the only idle one while more were
    // queued: pass the wake-up on (or add a thread) while slots remain.
    WakeOrSpawnLocked();
    mu_.Unlock();
    work();
    work = nullptr;
    mu_.Lock();
    --active_;
    SlotFreedLocked();
    if (closed_ && queue_.empty()) cv_.NotifyAll();
  }
  t_executor = nullptr;
  mu_.Unlock();
}

void Executor::OnBlock() {
  MutexLock lock(&mu_);
  --active_;
  SlotFreedLocked();
}

void Executor::OnUnblock() {
  MutexLock lock(&mu_);
  ++resuming_;
  while (!(active_ < concurrency_)) resume_cv_.Wait(&mu_);
  --resuming_;
  ++active_;
  // Another slot may still be free: for the next resumed call, else for queued work.
  if (active_ < concurrency_) SlotFreedLocked();
}

int Executor::resuming() {
  MutexLock lock(&mu_);
  return resuming_;
}

void Executor::BeforeBlock() {
  if (t_executor) t_executor->OnBlock();
}

void Executor::AfterBlock() {
  if (t_executor) t_executor->OnUnblock();
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
  if (held_ || resuming_ > 0) return false;
  held_ = true;
  return true;
}

void CallSlot::TakeResumed() {
  MutexLock lock(&mu_);
  ++resuming_;
  while (held_) cv_.Wait(&mu_);
  --resuming_;
  held_ = true;
}

void CallSlot::Release() {
  {
    MutexLock lock(&mu_);
    held_ = false;
  }
  cv_.NotifyOne();
}

int CallSlot::resuming() {
  MutexLock lock(&mu_);
  return resuming_;
}

}  // namespace orrery::runtime
