// Executor and CallSlot: calls interleave only where one waits (BeforeBlock/AfterBlock),
// never run beyond the concurrency limit, and a call back from a wait goes before calls
// that have not started. Threads meet on latches; no sleeps.
#include "actors/src/executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace orrery::runtime {
namespace {

constexpr auto kDeadline = std::chrono::seconds(30);

class Latch {
 public:
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kDeadline, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Spins (yielding) until `condition` holds or the deadline passes.
template <typename F>
bool Eventually(F condition) {
  auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// What the calls of one test saw: how many ran at once, and in which order they finished.
struct Probe {
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::mutex mu;
  std::vector<std::string> order;
  std::atomic<int> done{0};

  void Enter() {
    int now = ++inside;
    int seen = max_inside.load();
    while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
    }
  }
  void Exit(const std::string& name) {
    {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(name);
    }
    --inside;
    ++done;
  }
};

TEST(ExecutorTest, ResumedCallWaitsForTheSlotAndGoesBeforeNewCalls) {
  Executor executor(1);
  Probe probe;
  Latch a_may_resume, b_may_end, b_started;
  executor.Submit([&] {
    probe.Enter();
    --probe.inside;  // not running while it waits
    Executor::BeforeBlock();
    a_may_resume.Wait();
    Executor::AfterBlock();
    probe.Enter();
    probe.Exit("A");
  });
  executor.Submit([&] {
    probe.Enter();
    b_started.Open();
    b_may_end.Wait();
    probe.Exit("B");
  });
  executor.Submit([&] {
    probe.Enter();
    probe.Exit("C");
  });
  ASSERT_TRUE(b_started.Wait()) << "B never started while A waited";
  a_may_resume.Open();
  ASSERT_TRUE(Eventually([&] { return executor.resuming() == 1; }))
      << "A did not wait for the slot";
  b_may_end.Open();
  ASSERT_TRUE(Eventually([&] { return probe.done == 3; }));
  EXPECT_EQ(probe.max_inside, 1);
  EXPECT_EQ(probe.order, (std::vector<std::string>{"B", "A", "C"}));
}

TEST(ExecutorTest, ResumedCallsCountAgainstTheLimit) {
  Executor executor(2);
  Probe probe;
  Latch a_may_resume, b_may_end, b1_started, b2_started;
  executor.Submit([&] {
    probe.Enter();
    --probe.inside;
    Executor::BeforeBlock();
    a_may_resume.Wait();
    Executor::AfterBlock();
    probe.Enter();
    probe.Exit("A");
  });
  for (Latch* started : {&b1_started, &b2_started}) {
    executor.Submit([&, started] {
      probe.Enter();
      started->Open();
      b_may_end.Wait();
      probe.Exit("B");
    });
  }
  ASSERT_TRUE(b1_started.Wait());
  ASSERT_TRUE(b2_started.Wait());
  a_may_resume.Open();
  ASSERT_TRUE(Eventually([&] { return executor.resuming() == 1; }));
  EXPECT_EQ(probe.inside, 2);
  b_may_end.Open();
  ASSERT_TRUE(Eventually([&] { return probe.done == 3; }));
  EXPECT_EQ(probe.max_inside, 2);
}

// Calls submitted after one blocked (nothing was queued when it did) still get threads.
TEST(ExecutorTest, CallsSubmittedWhileOneWaitsStillRunUpToTheLimit) {
  Executor executor(2);
  Latch a_blocked, a_may_resume, b_may_end, b1_started, b2_started;
  std::atomic<int> done{0};
  executor.Submit([&] {
    Executor::BeforeBlock();
    a_blocked.Open();
    a_may_resume.Wait();
    Executor::AfterBlock();
    ++done;
  });
  ASSERT_TRUE(a_blocked.Wait());
  for (Latch* started : {&b1_started, &b2_started}) {
    executor.Submit([&, started] {
      started->Open();
      b_may_end.Wait();
      ++done;
    });
  }
  EXPECT_TRUE(b1_started.Wait());
  EXPECT_TRUE(b2_started.Wait()) << "the second call found no thread";
  a_may_resume.Open();
  b_may_end.Open();
  ASSERT_TRUE(Eventually([&] { return done == 3; }));
}

TEST(ExecutorTest, BlockHooksOutsideAnExecutorThreadDoNothing) {
  Executor::BeforeBlock();
  Executor::AfterBlock();
}

TEST(CallSlotTest, AResumedCallGoesBeforeNewOnes) {
  CallSlot slot;
  ASSERT_TRUE(slot.TryTake());
  EXPECT_FALSE(slot.TryTake()) << "one call at a time";
  std::atomic<bool> resumed{false};
  std::thread waiter([&] {
    slot.TakeResumed();
    resumed = true;
  });
  ASSERT_TRUE(Eventually([&] { return slot.resuming() == 1; }));
  EXPECT_FALSE(resumed);
  slot.Release();
  // The slot went to the resumed call, not to a new one.
  ASSERT_TRUE(Eventually([&] { return resumed.load(); }));
  EXPECT_FALSE(slot.TryTake());
  waiter.join();
  slot.Release();
  EXPECT_TRUE(slot.TryTake());
}

TEST(CallSlotTest, NewCallsWaitWhileAResumedCallWaits) {
  CallSlot slot;
  ASSERT_TRUE(slot.TryTake());
  std::thread waiter([&] {
    slot.TakeResumed();
    slot.Release();
  });
  ASSERT_TRUE(Eventually([&] { return slot.resuming() == 1; }));
  slot.Release();
  waiter.join();
  EXPECT_TRUE(slot.TryTake());
}

}  // namespace
}  // namespace orrery::runtime
