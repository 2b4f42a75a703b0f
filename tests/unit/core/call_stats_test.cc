// Call counts for the metrics (core/internal/call_stats.h): a worker's counter, the node's
// sums over live and retired workers, and malformed reports.
#include "core/internal/call_stats.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/fakes/worker_stats.h"

namespace orrery {
namespace {

using ::orrery::testing::StatsReport;

TEST(CallCounterTest, ReportsOnlyWhenSomethingChanged) {
  CallCounter c;
  proto::WorkerStatsMsg m;
  EXPECT_FALSE(c.TakeIfChanged(&m));
  c.Started();
  c.Ended(true, 0.003);  // in the 4 ms bucket (index 2)
  c.Started();
  c.Ended(false, 100);  // beyond the last bound: +Inf
  c.Started();          // still running
  ASSERT_TRUE(c.TakeIfChanged(&m));
  EXPECT_EQ(m.started, 3u);
  EXPECT_EQ(m.finished, 1u);
  EXPECT_EQ(m.failed, 1u);
  ASSERT_EQ(m.latency_buckets.size(), proto::kCallLatencyBuckets);
  EXPECT_EQ(m.latency_buckets[2], 1u);
  EXPECT_EQ(m.latency_buckets.back(), 1u);
  EXPECT_DOUBLE_EQ(m.latency_sum_s, 100.003);
  EXPECT_FALSE(c.TakeIfChanged(&m));
}

TEST(NodeCallStatsTest, SumsLiveAndRetiredWorkersAndKeepsTheLatestReport) {
  NodeCallStats s;
  EXPECT_TRUE(s.Update(StatsReport("a", 1, 0)));
  EXPECT_TRUE(s.Update(StatsReport("a", 5, 1)));  // cumulative: replaces the first
  EXPECT_TRUE(s.Update(StatsReport("b", 2, 0)));
  s.Retire("a");  // its last report still counts
  s.Retire("unknown");
  auto t = s.Sum();
  EXPECT_EQ(t.finished, 7u);
  EXPECT_EQ(t.failed, 1u);
  EXPECT_EQ(t.started, 8u);
  EXPECT_EQ(t.latency.count(), 8u);
  EXPECT_TRUE(s.Update(StatsReport("b", 3, 0)));
  EXPECT_EQ(s.Sum().finished, 8u);
}

TEST(NodeCallStatsTest, RefusesMalformedReports) {
  NodeCallStats s;
  auto short_buckets = StatsReport("a", 1, 0);
  short_buckets.latency_buckets.resize(3);
  EXPECT_FALSE(s.Update(short_buckets));
  auto long_buckets = StatsReport("a", 1, 0);
  long_buckets.latency_buckets.resize(1000, 1);
  EXPECT_FALSE(s.Update(long_buckets));
  auto nan_sum = StatsReport("a", 1, 0);
  nan_sum.latency_sum_s = std::nan("");
  EXPECT_FALSE(s.Update(nan_sum));
  auto negative = StatsReport("a", 1, 0);
  negative.latency_sum_s = -1;
  EXPECT_FALSE(s.Update(negative));
  EXPECT_EQ(s.Sum().started, 0u);
}

}  // namespace
}  // namespace orrery
