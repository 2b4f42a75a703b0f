#include "actors/src/executor.h"

#include <pthread.h>

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
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void Executor::ThreadMain() {
  pthread_setname_np(pthread_self(), "orrery-exec");
  t_executor = this;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ++idle_;
    cv_.wait(lock, [this] { return closed_ || (!queue_.empty() && active_ < concurrency_); });
    --idle_;
    if (closed_ && queue_.empty()) break;
    Work work = std::move(queue_.front());
    queue_.pop_front();
    ++active_;
    lock.unlock();
    work();
    work = nullptr;
    lock.lock();
    --active_;
    if (!queue_.empty()) cv_.notify_one();
  }
  t_executor = nullptr;
}

void Executor::OnBlock() {
  std::lock_guard<std::mutex> lock(mu_);
  --active_;
  if (queue_.empty()) return;
  if (idle_ == 0 && int(threads_.size()) < max_threads_ && !closed_) {
    SpawnLocked();
  } else {
    cv_.notify_one();
  }
}

void Executor::OnUnblock() {
  std::lock_guard<std::mutex> lock(mu_);
  ++active_;
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

}  // namespace orrery::runtime
