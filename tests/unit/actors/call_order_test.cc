// CallOrder: the order in which an actor's worker starts calls. Calls of one caller start in
// sequence order; a missing number is waited for gap_timeout_s of serving time, then given up
// on and reported; idle callers are forgotten and pick up again from first_pending. Time is
// the test's own; no threads, no sockets.
#include "actors/src/call_order.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace orrery::runtime {
namespace {

using Order = CallOrder<int>;

class CallOrderTest : public ::testing::Test {
 protected:
  // Adds call `seq` of `caller` (its value is the seq) and returns what became ready.
  std::vector<int> Add(const std::string& caller, uint64_t seq, uint64_t first_pending = 0,
                       Order::Admit expect = Order::Admit::kQueued) {
    std::vector<int> ready;
    EXPECT_EQ(order_.Add(caller, seq, first_pending, int(seq), now_, &ready), expect);
    return ready;
  }
  std::vector<int> Tick(double at, std::vector<LostCalls>* lost, bool caught_up = true) {
    now_ = at;
    std::vector<int> ready;
    order_.Tick(now_, caught_up, &ready, lost);
    return ready;
  }

  double now_ = 0;
  Order order_{CallOrderOptions{/*gap_timeout_s=*/10, /*idle_forget_s=*/100,
                                /*max_waiting_per_caller=*/4}};
};

TEST_F(CallOrderTest, CallsStartInSequenceOrderWhateverOrderTheyArriveIn) {
  EXPECT_EQ(Add("a", 0), (std::vector<int>{0}));
  EXPECT_TRUE(Add("a", 2).empty());
  EXPECT_TRUE(Add("a", 3).empty());
  EXPECT_EQ(Add("a", 1), (std::vector<int>{1, 2, 3}));
  // Another caller has a sequence of its own.
  EXPECT_EQ(Add("b", 0), (std::vector<int>{0}));
  EXPECT_EQ(order_.next("a"), 4u);
  EXPECT_EQ(order_.next("b"), 1u);
}

TEST_F(CallOrderTest, ANumberStartedOrWaitingAlreadyIsADuplicate) {
  Add("a", 0);
  Add("a", 0, 0, Order::Admit::kDuplicate);
  Add("a", 5);
  Add("a", 5, 0, Order::Admit::kDuplicate);
}

TEST_F(CallOrderTest, AMissingNumberIsGivenUpOnAfterTheGapTimeoutAndReported) {
  Add("a", 0);
  EXPECT_TRUE(Add("a", 3).empty());  // 1 and 2 are missing
  std::vector<LostCalls> lost;
  for (double t = 1; t < 10; t += 1) {
    EXPECT_TRUE(Tick(t, &lost).empty());
    EXPECT_TRUE(lost.empty()) << "gave up after " << t << " s";
  }
  EXPECT_EQ(Tick(10, &lost), (std::vector<int>{3}));
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].caller, "a");
  EXPECT_EQ(lost[0].first_seq, 1u);
  EXPECT_EQ(lost[0].end_seq, 3u);
  // A lost number that turns up after all must not run out of order.
  Add("a", 1, 0, Order::Admit::kDuplicate);
  EXPECT_EQ(Add("a", 4), (std::vector<int>{4}));
}

TEST_F(CallOrderTest, LateTicksCountAtMostTwoSecondsEach) {
  // While a long call holds the worker's loop, its ticks come late: the missing call may be
  // unread in the socket, so that time does not count in full.
  Add("a", 1);  // 0 is missing
  std::vector<LostCalls> lost;
  Tick(0, &lost);
  Tick(60, &lost);  // one tick a minute later: counts 2 s
  Tick(120, &lost);
  EXPECT_TRUE(lost.empty());
  for (double t = 121; t < 126; t += 1) Tick(t, &lost);
  EXPECT_TRUE(lost.empty());  // 4 + 5 s
  EXPECT_EQ(Tick(126, &lost), (std::vector<int>{1}));
  EXPECT_EQ(lost.size(), 1u);
}

TEST_F(CallOrderTest, TimeWithCallsUnreadInTheSocketDoesNotCount) {
  // A backlog of calls the worker has not read yet may hold the missing one.
  Add("a", 1);  // 0 is missing
  std::vector<LostCalls> lost;
  for (double t = 1; t < 100; t += 1) Tick(t, &lost, /*caught_up=*/false);
  EXPECT_TRUE(lost.empty());
  for (double t = 100; t < 109; t += 1) Tick(t, &lost);
  EXPECT_TRUE(lost.empty());  // 9 s of caught-up time
  EXPECT_EQ(Tick(110, &lost), (std::vector<int>{1}));
  EXPECT_EQ(lost.size(), 1u);
}

TEST_F(CallOrderTest, AGapThatClosesInTimeLosesNothing) {
  Add("a", 1);
  std::vector<LostCalls> lost;
  Tick(9, &lost);
  EXPECT_EQ(Add("a", 0), (std::vector<int>{0, 1}));
  Tick(30, &lost);
  EXPECT_TRUE(lost.empty());
}

TEST_F(CallOrderTest, ACallerThatSaysHowFarItSentOpensTheGapOfItsLastCalls) {
  // Calls 0..2 of "a" were lost with nothing behind them, and "a" was never seen here:
  // its kCallsSent (first_pending 0, end 3) makes the gap visible.
  std::vector<int> ready;
  order_.Expect("a", 0, 3, now_, &ready);
  EXPECT_TRUE(ready.empty());
  std::vector<LostCalls> lost;
  for (double t = 1; t < 10; t += 1) Tick(t, &lost);
  EXPECT_TRUE(lost.empty());
  Tick(10, &lost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].first_seq, 0u);
  EXPECT_EQ(lost[0].end_seq, 3u);
  EXPECT_EQ(Add("a", 3), (std::vector<int>{3}));
  // An announcement that everything sent arrived opens nothing; first_pending moves on.
  order_.Expect("a", 4, 4, now_, &ready);
  EXPECT_EQ(Add("a", 4), (std::vector<int>{4}));
  lost.clear();
  Tick(40, &lost);
  EXPECT_TRUE(lost.empty());
}

TEST_F(CallOrderTest, FirstPendingSkipsNumbersTheCallerNoLongerWaitsFor) {
  // A caller this worker has forgotten (or never saw) goes on from first_pending.
  EXPECT_EQ(Add("a", 7, 7), (std::vector<int>{7}));
  EXPECT_TRUE(Add("a", 9, 8).empty());
  EXPECT_EQ(Add("a", 8, 8), (std::vector<int>{8, 9}));
}

TEST_F(CallOrderTest, TooManyCallsBehindAGapAreRefused) {
  for (uint64_t seq = 1; seq <= 4; ++seq) Add("a", seq);
  Add("a", 5, 0, Order::Admit::kTooMany);
  EXPECT_EQ(Add("a", 0), (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST_F(CallOrderTest, CallersAreBoundedAndAFloodOfAnnouncementsIsToo) {
  // What peers send cannot grow the order without bound: new callers past max_callers are
  // refused (an announcement from one is ignored), and a caller announcing ever higher ends
  // keeps at most max_waiting_per_caller timings, the newest timed from its latest end.
  CallOrder<int> order(CallOrderOptions{/*gap_timeout_s=*/10, /*idle_forget_s=*/100,
                                        /*max_waiting_per_caller=*/4, /*max_callers=*/2});
  std::vector<int> ready;
  EXPECT_EQ(order.Add("a", 0, 0, 0, 0, &ready), CallOrder<int>::Admit::kQueued);
  EXPECT_EQ(order.Add("b", 0, 0, 0, 0, &ready), CallOrder<int>::Admit::kQueued);
  EXPECT_EQ(order.Add("c", 0, 0, 0, 0, &ready), CallOrder<int>::Admit::kTooManyCallers);
  order.Expect("d", 0, 5, 0, &ready);
  EXPECT_EQ(order.callers(), 2u);
  for (uint64_t end = 2; end < 1000; ++end) order.Expect("a", 0, end, double(end) / 100, &ready);
  std::vector<LostCalls> lost;
  for (double t = 1; t <= 9; t += 1) order.Tick(t, true, &ready, &lost);
  EXPECT_EQ(lost.size(), 0u);
  for (double t = 10; t <= 20; t += 1) order.Tick(t, true, &ready, &lost);
  // Given up on once each timing ran out, the last (absorbing ends up to 999) included.
  ASSERT_FALSE(lost.empty());
  EXPECT_EQ(lost.back().end_seq, 999u);
  EXPECT_EQ(order.next("a"), 999u);
}

TEST_F(CallOrderTest, IdleCallersAreForgottenButNotWhileACallRuns) {
  Add("a", 0);  // running until Finished
  Add("b", 0);
  order_.Finished("b", 0);
  std::vector<LostCalls> lost;
  for (double t = 1; t <= 100; t += 1) Tick(t, &lost);
  EXPECT_EQ(order_.callers(), 1u);  // "b" went; "a" still runs its call
  EXPECT_EQ(order_.next("a"), 1u);
  order_.Finished("a", 100);
  for (double t = 101; t <= 200; t += 1) Tick(t, &lost);
  EXPECT_EQ(order_.callers(), 0u);
  // It comes back: its first_pending says where it stands.
  EXPECT_EQ(Add("a", 1, 1), (std::vector<int>{1}));
  EXPECT_TRUE(lost.empty());
}

}  // namespace
}  // namespace orrery::runtime
