// orrery::Mutex and MutexLock (core/internal/thread_annotations.h): a real mutex under the
// annotations. Built with -DORRERY_THREAD_SAFETY=ON this file is also checked by clang's
// analysis, so it must stay free of thread-safety warnings.
#include "core/internal/thread_annotations.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <thread>
#include <vector>

namespace {

class Counter {
 public:
  void Add(int n) EXCLUDES(mu_) {
    orrery::MutexLock lock(&mu_);
    AddLocked(n);
  }
  int Get() EXCLUDES(mu_) {
    orrery::MutexLock lock(&mu_);
    return value_;
  }
  bool TryAdd(int n) EXCLUDES(mu_) {
    if (!mu_.TryLock()) return false;
    AddLocked(n);
    mu_.Unlock();
    return true;
  }
  orrery::Mutex& mu() RETURN_CAPABILITY(mu_) { return mu_; }

 private:
  void AddLocked(int n) REQUIRES(mu_) { value_ += n; }

  orrery::Mutex mu_;
  int value_ GUARDED_BY(mu_) = 0;
};

TEST(ThreadAnnotationsTest, MutexLockSerializesUpdates) {
  Counter c;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&c] {
      for (int i = 0; i < 10000; ++i) c.Add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.Get(), 40000);
}

TEST(ThreadAnnotationsTest, TryLockFailsWhileHeld) {
  Counter c;
  {
    orrery::MutexLock lock(&c.mu());
    std::thread other([&c] { EXPECT_FALSE(c.TryAdd(1)); });
    other.join();
  }
  EXPECT_TRUE(c.TryAdd(2));
  EXPECT_EQ(c.Get(), 2);
}

TEST(ThreadAnnotationsTest, WorksWithConditionVariableAny) {
  orrery::Mutex mu;
  std::condition_variable_any cv;
  bool ready = false;
  std::thread setter([&] {
    std::lock_guard<orrery::Mutex> lock(mu);
    ready = true;
    cv.notify_all();
  });
  {
    std::unique_lock<orrery::Mutex> lock(mu);
    cv.wait(lock, [&] { return ready; });
    EXPECT_TRUE(ready);
  }
  setter.join();
}

// A flag behind a Mutex, set by one thread and awaited by another with a CondVar: the
// pattern the annotated classes use (a wait loop under a MutexLock).
class Flag {
 public:
  void Set() EXCLUDES(mu_) {
    orrery::MutexLock lock(&mu_);
    set_ = true;
    cv_.NotifyAll();
  }
  void Wait() EXCLUDES(mu_) {
    orrery::MutexLock lock(&mu_);
    while (!set_) cv_.Wait(&mu_);
  }
  // True when set before the deadline.
  bool WaitUntil(std::chrono::steady_clock::time_point deadline) EXCLUDES(mu_) {
    orrery::MutexLock lock(&mu_);
    while (!set_ && cv_.WaitUntil(&mu_, deadline)) {
    }
    return set_;
  }

 private:
  orrery::Mutex mu_;
  orrery::CondVar cv_;
  bool set_ GUARDED_BY(mu_) = false;
};

TEST(ThreadAnnotationsTest, CondVarWaitWakesOnNotify) {
  Flag flag;
  std::thread setter([&flag] { flag.Set(); });
  flag.Wait();  // returns only once Set ran: a lost wake-up would hang here
  setter.join();
  EXPECT_TRUE(flag.WaitUntil(std::chrono::steady_clock::now()));
}

TEST(ThreadAnnotationsTest, CondVarWaitUntilReturnsAtTheDeadline) {
  Flag flag;
  // Nobody sets it: the wait ends at the deadline, with the mutex held again (the MutexLock
  // in WaitUntil releases it once more on return; a double unlock would be undefined).
  EXPECT_FALSE(flag.WaitUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(20)));
  std::thread setter([&flag] { flag.Set(); });
  setter.join();
  EXPECT_TRUE(flag.WaitUntil(std::chrono::steady_clock::now() + std::chrono::seconds(30)));
}

}  // namespace
