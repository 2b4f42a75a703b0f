// A flood of calls to one slow actor (docs/api.md "Pending calls"): more 64 KiB calls than
// its bound of pending calls (set, or the default), more bytes than the transport queues to
// one peer. Calls past
// the bound are refused at submission with PendingCallsLimitExceededError; every call taken
// ends with its value (none is lost in a full send queue, none hangs behind a gap); the
// actor's next ordinary call returns its value.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "orrery/orrery.h"
#include "test_support.h"

namespace {

class Slow {
 public:
  static Slow* Create() { return new Slow(); }
  int Take(std::string arg, int i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return arg.size() == 64 * 1024 ? i : -1;
  }
  int Echo(int x) { return x; }
};

ORRERY_REMOTE(Slow::Create, &Slow::Take, &Slow::Echo);

constexpr int kOrdinaryCallMs = 30000;

TEST(PendingCallsTest, AFloodToASlowActorIsRefusedAtSubmissionAndNothingHangs) {
  constexpr int kBound = 1500;  // 96 MiB of arguments: more than one peer's 64 MiB send queue
  auto actor = orrery::Actor(Slow::Create).SetMaxPendingCalls(kBound).Remote();
  ASSERT_EQ(*orrery::Get(actor.Task(&Slow::Echo).Remote(0), orrery_test::kGetTimeoutMs), 0);
  const std::string arg(64 * 1024, 'x');
  std::vector<orrery::ObjectRef<int>> taken;
  std::vector<int> numbers;
  int refused = 0;
  for (int i = 0; i < 4 * kBound; ++i) {
    try {
      taken.push_back(actor.Task(&Slow::Take).Remote(arg, i));
      numbers.push_back(i);
    } catch (const orrery::PendingCallsLimitExceededError& e) {
      ++refused;
      if (refused == 1) {
        EXPECT_NE(std::string(e.what()).find("pending"), std::string::npos);
      }
    }
  }
  EXPECT_GE(int(taken.size()), kBound);
  EXPECT_GT(refused, 0) << "the bound was never reached";

  // The ordinary call right after: refused at once while the bound is still reached, else
  // queued behind the flood; either way it does not hang.
  try {
    EXPECT_EQ(*orrery::Get(actor.Task(&Slow::Echo).Remote(7), kOrdinaryCallMs), 7);
  } catch (const orrery::PendingCallsLimitExceededError&) {
  }
  for (size_t k = 0; k < taken.size(); ++k)
    ASSERT_EQ(*orrery::Get(taken[k], orrery_test::kGetTimeoutMs), numbers[k]) << "call " << k;
  EXPECT_EQ(*orrery::Get(actor.Task(&Slow::Echo).Remote(8), kOrdinaryCallMs), 8);
  actor.Kill();
}

// The default bound (a budget of bytes): 50,000 calls of 64 KiB to an actor that takes a
// millisecond each, then an ordinary call. Prints what it saw (docs/benchmarks.md).
TEST(PendingCallsTest, TheDefaultBoundKeepsACallBehindAFloodWithinSeconds) {
  auto actor = orrery::Actor(Slow::Create).Remote();
  ASSERT_EQ(*orrery::Get(actor.Task(&Slow::Echo).Remote(0), orrery_test::kGetTimeoutMs), 0);
  const std::string arg(64 * 1024, 'x');
  std::vector<orrery::ObjectRef<int>> taken;
  int refused = 0;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 50000; ++i) {
    try {
      taken.push_back(actor.Task(&Slow::Take).Remote(arg, i));
    } catch (const orrery::PendingCallsLimitExceededError&) {
      ++refused;
    }
  }
  auto submitted = std::chrono::steady_clock::now();
  EXPECT_GT(refused, 0) << "the default bound was never reached";
  int echoed = -1;
  try {
    echoed = *orrery::Get(actor.Task(&Slow::Echo).Remote(7), kOrdinaryCallMs);
    EXPECT_EQ(echoed, 7);
  } catch (const orrery::PendingCallsLimitExceededError&) {
  }
  auto ordinary = std::chrono::steady_clock::now();
  int returned = 0;
  for (auto& ref : taken) returned += *orrery::Get(ref, orrery_test::kGetTimeoutMs) >= 0;
  EXPECT_EQ(returned, int(taken.size()));
  auto seconds = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::printf(
      "flood: %zu calls taken, %d refused at submission, in %.1f s; the ordinary call "
      "%s after %.1f s more\n",
      taken.size(), refused, seconds(start, submitted), echoed == 7 ? "returned" : "was refused",
      seconds(submitted, ordinary));
  actor.Kill();
}

TEST(PendingCallsTest, ABoundBelowMinusOneIsAConfigError) {
  EXPECT_THROW(orrery::Actor(Slow::Create).SetMaxPendingCalls(-2).Remote(), orrery::ConfigError);
}

}  // namespace
