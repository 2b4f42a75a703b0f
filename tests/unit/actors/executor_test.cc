// Executor and CallSlot: at most the concurrency limit of calls at once, started in
// submission order; a call holds its slot until it returns. Threads meet on latches; no
// sleeps.
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

// Two slots, three calls: the third starts only once one of the first two returns, however
// long they hold their slots.
TEST(ExecutorTest, RunsAtMostItsConcurrencyAtOnce) {
  Executor executor(2);
  Probe probe;
  Latch may_end, a_started, b_started;
  for (auto [name, started] : {std::pair{"A", &a_started}, std::pair{"B", &b_started}}) {
    executor.Submit([&, name = std::string(name), started = started] {
      probe.Enter();
      started->Open();
      may_end.Wait();
      probe.Exit(name);
    });
  }
  executor.Submit([&] {
    probe.Enter();
    probe.Exit("C");
  });
  ASSERT_TRUE(a_started.Wait());
  ASSERT_TRUE(b_started.Wait()) << "the second slot was not used";
  EXPECT_EQ(probe.done, 0) << "C ran while both slots were held";
  may_end.Open();
  ASSERT_TRUE(Eventually([&] { return probe.done == 3; }));
  EXPECT_EQ(probe.max_inside, 2);
  EXPECT_NE(probe.order.front(), "C");  // it started only after one of them ended
}

// With one slot the calls run one after the other, in the order they were submitted.
TEST(ExecutorTest, OneSlotRunsCallsInSubmissionOrder) {
  Executor executor(1);
  Probe probe;
  std::vector<std::string> expected;
  for (int i = 0; i < 50; ++i) {
    expected.push_back(std::to_string(i));
    executor.Submit([&probe, i] {
      probe.Enter();
      probe.Exit(std::to_string(i));
    });
  }
  ASSERT_TRUE(Eventually([&] { return probe.done == 50; }));
  EXPECT_EQ(probe.max_inside, 1);
  std::lock_guard<std::mutex> lock(probe.mu);
  EXPECT_EQ(probe.order, expected);
}

// Stop runs what was queued before it returns.
TEST(ExecutorTest, StopRunsTheQueuedCallsFirst) {
  std::atomic<int> ran{0};
  {
    Executor executor(1);
    Latch may_run;
    executor.Submit([&] {
      may_run.Wait();
      ++ran;
    });
    for (int i = 0; i < 5; ++i) executor.Submit([&] { ++ran; });
    may_run.Open();
    executor.Stop();
    EXPECT_EQ(ran, 6);
  }
  EXPECT_EQ(ran, 6);
}

TEST(CallSlotTest, OneCallAtATime) {
  CallSlot slot;
  ASSERT_TRUE(slot.TryTake());
  EXPECT_FALSE(slot.TryTake()) << "one call at a time";
  slot.Release();
  EXPECT_TRUE(slot.TryTake());
  slot.Release();
}

}  // namespace
}  // namespace orrery::runtime
