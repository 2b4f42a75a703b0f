// The node labels and label selectors the modules share (core/internal/labels.h); the
// scheduler's policies use the same selectors (tests/unit/scheduler/policy_test.cc).
#include "core/internal/labels.h"

#include <gtest/gtest.h>

namespace orrery {
namespace {

TEST(LabelsTest, SelectorsMatchEqualityInAndNotIn) {
  Labels node{{kTpuSliceNameLabel, "slice-a"}, {"zone", "us-a"}};
  EXPECT_TRUE(MatchesSelector(node, {}));
  EXPECT_TRUE(MatchesSelector(node, {{kTpuSliceNameLabel, "slice-a"}}));
  EXPECT_FALSE(MatchesSelector(node, {{kTpuSliceNameLabel, "slice-b"}}));
  EXPECT_FALSE(MatchesSelector(node, {{kTpuWorkerIdLabel, "0"}}));
  EXPECT_TRUE(MatchesSelector(node, {{"zone", "in(us-b, us-a)"}}));
  EXPECT_FALSE(MatchesSelector(node, {{"zone", "!in(us-a)"}}));
  EXPECT_TRUE(MatchesSelector(node, {{kTpuPodTypeLabel, "!in(v4-16)"}}));
}

}  // namespace
}  // namespace orrery
