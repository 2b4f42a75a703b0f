#include "actors/src/executor.h"

#include <pthread.h>

#include <algorithm>

namespace orrery::runtime {

namespace {
thread_local Executor* t_executor = nullptr;
}  // namespace

Executor::Executor(int concurrency, int max_threads)
    : concurrency_(concurrency < 1 ? 1 : concurrency), max_threads_(std::max(max_threads, concurrency)) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < concurrency_; ++i) SpawnLocked();
}

Executor::~Executor() { Stop(); }

void Executor::SpawnLocked() {
  threads_.emplace_back([this] { ThreadMain(); });
}

void Executor::Submit(Work work) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(work));
  WakeOrSpawnLocked();
}

void Executor::WakeOrSpawnLocked() {
  if (!CanStartLocked()) return;
  if (idle_ > 0) {
    cv_.notify_one();
  } else if (int(threads_.size()) < max_threads_ && !closed_) {
    SpawnLocked();
  }
}

bool Executor::CanStartLocked() const { return !queue_.empty() && active_ < concurrency_ && resuming_ == 0; }

void Executor::SlotFreedLocked() {
  if (resuming_ > 0) {
    resume_cv_.notify_one();
  } else {
    WakeOrSpawnLocked();
  }
}

void Executor::ThreadMain() {
  pthread_setname_np(pthread_self(), "orrery-exec");
  t_executor = this;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ++idle_;
    // Once closed, queued calls still run (within the limit) before the thread ends.
    cv_.wait(lock, [this] { return CanStartLocked() || (closed_ && queue_.empty()); });
    --idle_;
    if (!CanStartLocked()) break;  // closed and drained
    Work work = std::move(queue_.front());
    queue_.pop_front();
    ++active_;
    // A thread woken for one call may have been the only idle one while more were
    // queued: pass the wake-up on (or add a thread) while slots remain.
    WakeOrSpawnLocked();
    lock.unlock();
    work();
    work = nullptr;
    lock.lock();
    --active_;
    SlotFreedLocked();
    if (closed_ && queue_.empty()) cv_.notify_all();
  }
  t_executor = nullptr;
}

void Executor::OnBlock() {
  std::lock_guard<std::mutex> lock(mu_);
  --active_;
  SlotFreedLocked();
}

void Executor::OnUnblock() {
  std::unique_lock<std::mutex> lock(mu_);
  ++resuming_;
  resume_cv_.wait(lock, [this] { return active_ < concurrency_; });
  --resuming_;
  ++active_;
  // Another slot may still be free: for the next resumed call, else for queued work.
  if (active_ < concurrency_) SlotFreedLocked();
}

int Executor::resuming() {
  std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads) {
    if (t.get_id() == std::this_thread::get_id()) {
      t.detach();
    } else if (t.joinable()) {
      t.join();
    }
  }
}

bool CallSlot::TryTake() {
  std::lock_guard<std::mutex> lock(mu_);
  if (held_ || resuming_ > 0) return false;
  held_ = true;
  return true;
}

void CallSlot::TakeResumed() {
  std::unique_lock<std::mutex> lock(mu_);
  ++resuming_;
  cv_.wait(lock, [this] { return !held_; });
  --resuming_;
  held_ = true;
}

void CallSlot::Release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false;
  }
  cv_.notify_one();
}

int CallSlot::resuming() {
  std::lock_guard<std::mutex> lock(mu_);
  return resuming_;
}

}  // namespace orrery::runtime
