#include "actors/src/executor.h"

#include <pthread.h>

#include <boost/fiber/all.hpp>

#include "actors/src/object_store.h"

namespace orrery::runtime {

namespace {
// Per executor thread: how many of its call fibers are running (not parked in a Get).
struct ThreadSlot {
  int active = 0;
  boost::fibers::mutex mu;
  boost::fibers::condition_variable cv;
};
thread_local ThreadSlot* t_slot = nullptr;

void ReleaseSlot() {
  if (!t_slot) return;
  std::unique_lock<boost::fibers::mutex> lock(t_slot->mu);
  --t_slot->active;
  t_slot->cv.notify_all();
}

void ReacquireSlot() {
  if (!t_slot) return;
  std::unique_lock<boost::fibers::mutex> lock(t_slot->mu);
  ++t_slot->active;
}
}  // namespace

Executor::Executor(int concurrency) {
  ObjectStore::SetBlockHooks(&ReleaseSlot, &ReacquireSlot);
  if (concurrency < 1) concurrency = 1;
  for (int i = 0; i < concurrency; ++i) threads_.emplace_back([this] { ThreadMain(); });
}

Executor::~Executor() { Stop(); }

void Executor::Submit(Work work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
}

bool Executor::Pop(Work* out) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return closed_ || !queue_.empty(); });
  if (queue_.empty()) return false;
  *out = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

void Executor::ThreadMain() {
  pthread_setname_np(pthread_self(), "orrery-exec");
  ThreadSlot slot;
  t_slot = &slot;
  while (true) {
    {
      std::unique_lock<boost::fibers::mutex> lock(slot.mu);
      slot.cv.wait(lock, [&] { return slot.active == 0; });
      slot.active = 1;
    }
    Work work;
    if (!Pop(&work)) break;
    boost::fibers::fiber([&slot, w = std::move(work)]() mutable {
      w();
      std::unique_lock<boost::fibers::mutex> lock(slot.mu);
      --slot.active;
      slot.cv.notify_all();
    }).detach();
  }
  // Let call fibers still parked in a wait finish before the thread goes.
  std::unique_lock<boost::fibers::mutex> lock(slot.mu);
  slot.active -= 1;
  slot.cv.wait(lock, [&] { return slot.active <= 0; });
  t_slot = nullptr;
}

void Executor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ && threads_.empty()) return;
    closed_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

}  // namespace orrery::runtime
