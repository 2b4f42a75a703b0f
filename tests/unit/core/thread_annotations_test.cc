// orrery::Mutex and MutexLock (core/src/thread_annotations.h): a real mutex under the
// annotations. Built with -DORRERY_THREAD_SAFETY=ON this file is also checked by clang's
// analysis, so it must stay free of thread-safety warnings.
#include "core/src/thread_annotations.h"

#include <gtest/gtest.h>

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

}  // namespace
