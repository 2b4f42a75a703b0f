// WaitSpin (actors/src/wait_spin.h): watching for a completion before sleeping, and each
// thread's own choice of whether watching pays.
#include "actors/src/wait_spin.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace orrery::internal {
namespace {

// Runs `body` on a fresh thread, whose record of recent waits starts clean.
template <typename F>
void OnFreshThread(F body) {
  std::thread t(body);
  t.join();
}

TEST(WaitSpinTest, TheBudgetIsReadStrictly) {
  EXPECT_EQ(ParseWaitSpinBudgetUs(nullptr), 300);
  EXPECT_EQ(ParseWaitSpinBudgetUs(""), 300);
  EXPECT_EQ(ParseWaitSpinBudgetUs("0"), 0);
  EXPECT_EQ(ParseWaitSpinBudgetUs("150"), 150);
  EXPECT_EQ(ParseWaitSpinBudgetUs("10000"), 10000);
  EXPECT_EQ(ParseWaitSpinBudgetUs("10001"), 300);
  EXPECT_EQ(ParseWaitSpinBudgetUs("-5"), 300);
  EXPECT_EQ(ParseWaitSpinBudgetUs("12abc"), 300);
  EXPECT_EQ(ParseWaitSpinBudgetUs("99999999999999999999"), 300);
}

TEST(WaitSpinTest, ACompletionWithinTheBudgetIsSeenWithoutSleeping) {
  // A budget of 50 ms, so that the completer gets a core within it even on a loaded machine;
  // a watch that loses its own core stops at once, so a few tries are allowed, each on a
  // fresh thread (which watches). The completer sleeps until the watch starts.
  int seen = 0, preempted = 0, attempts = 0;
  for (; attempts < 10 && seen == 0; ++attempts) {
    OnFreshThread([&] {
      std::atomic<uint64_t> completions{0};
      std::atomic<bool> done{false};
      std::mutex mu;
      std::condition_variable cv;
      bool watching = false;
      std::thread completer([&] {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return watching; });
        done = true;
        completions.fetch_add(1);
      });
      WaitSpin spin(-1, 50'000);
      {
        std::lock_guard<std::mutex> lock(mu);
        watching = true;
      }
      cv.notify_one();
      bool found = spin.Spin(completions, [&] { return done.load(); });
      completer.join();
      seen += found;
      preempted += !found && spin.preempted();
    });
  }
  if (seen == 0 && preempted == attempts)
    GTEST_SKIP() << "the machine is too busy: every watch lost its core";
  EXPECT_EQ(seen, 1);
}

TEST(WaitSpinTest, AThreadWhoseWaitsAreSlowStopsWatchingAndQuickOnesBringItBack) {
  if (WaitSpinBudgetUs() == 0) GTEST_SKIP() << "ORRERY_WAIT_SPIN_US=0 turns watching off";
  OnFreshThread([] {
    std::atomic<uint64_t> never{0};
    int looks = 0;
    auto look = [&] {
      ++looks;
      return false;
    };
    // A first wait watches: it looks as it starts and when the budget runs out.
    {
      WaitSpin spin(-1);
      EXPECT_FALSE(spin.Spin(never, look));
    }
    EXPECT_EQ(looks, 2);
    // Waits that outlast the budget (those it does not watch sleep past it): after a few
    // the thread no longer watches.
    const auto past_budget = std::chrono::microseconds(WaitSpinBudgetUs() + 200);
    int watched = 1;
    for (int i = 0; i < 20; ++i) {
      int before = looks;
      WaitSpin spin(-1);
      spin.Spin(never, look);
      if (looks > before) {
        ++watched;
      } else {
        std::this_thread::sleep_for(past_budget);
      }
    }
    EXPECT_LT(watched, 10);
    looks = 0;
    {
      WaitSpin spin(-1);
      EXPECT_FALSE(spin.Spin(never, look));
    }
    EXPECT_EQ(looks, 0) << "a thread whose waits are slow should sleep at once";
    // Waits that end quickly (here: at once, without watching) bring it back.
    for (int i = 0; i < 20; ++i) WaitSpin quick(-1);
    {
      WaitSpin spin(-1);
      EXPECT_FALSE(spin.Spin(never, look));
    }
    EXPECT_EQ(looks, 2);
  });
}

TEST(WaitSpinTest, AWaitWithoutTimeToSpareDoesNotWatch) {
  OnFreshThread([] {
    std::atomic<uint64_t> never{0};
    int looks = 0;
    WaitSpin spin(0);  // Get(ref, 0): a look, no wait
    EXPECT_FALSE(spin.Spin(never, [&] {
      ++looks;
      return false;
    }));
    EXPECT_EQ(looks, 0);
  });
}

}  // namespace
}  // namespace orrery::internal
