// Placement-group bundle placement (PlaceBundles): all bundles or none, each strategy's
// rule, same-label groups (one TPU slice), and a randomized check that a placement never
// overcommits a node or breaks its strategy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>

#include "orrery/placement.h"
#include "orrery/resources.h"
#include "orrery/scheduler/policy.h"
#include "tests/unit/scheduler/node_builders.h"

namespace orrery::scheduler {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using test_nodes::Idle;
using test_nodes::Node;

const Resources kOneCpu{{"CPU", 1}};

TEST(PlacementStrategyNameTest, NamesEveryStrategy) {
  EXPECT_STREQ(PlacementStrategyName(PlacementStrategy::PACK), "PACK");
  EXPECT_STREQ(PlacementStrategyName(PlacementStrategy::SPREAD), "SPREAD");
  EXPECT_STREQ(PlacementStrategyName(PlacementStrategy::STRICT_PACK), "STRICT_PACK");
  EXPECT_STREQ(PlacementStrategyName(PlacementStrategy::STRICT_SPREAD), "STRICT_SPREAD");
}

TEST(PlaceBundlesTest, NoBundlesIsRejected) {
  BundleDecision d = PlaceBundles({}, PlacementStrategy::PACK, {Idle({{"CPU", 4}})});
  EXPECT_NE(d.outcome, Outcome::kPlaced);
  EXPECT_FALSE(d.reason.empty());
}

TEST(PlaceBundlesTest, EveryStrategyFitsOnOneBigNodeExceptStrictSpread) {
  ClusterView view{Idle({{"CPU", 8}})};
  std::vector<Resources> bundles{kOneCpu, kOneCpu};
  for (auto s :
       {PlacementStrategy::PACK, PlacementStrategy::SPREAD, PlacementStrategy::STRICT_PACK}) {
    BundleDecision d = PlaceBundles(bundles, s, view);
    EXPECT_EQ(d.outcome, Outcome::kPlaced) << PlacementStrategyName(s);
    EXPECT_THAT(d.node_of_bundle, ElementsAre(0, 0)) << PlacementStrategyName(s);
  }
  BundleDecision strict = PlaceBundles(bundles, PlacementStrategy::STRICT_SPREAD, view);
  EXPECT_EQ(strict.outcome, Outcome::kInfeasible) << "two bundles need two nodes";
  EXPECT_TRUE(strict.node_of_bundle.empty());
  EXPECT_THAT(strict.reason, HasSubstr("STRICT_SPREAD"));
}

TEST(PlaceBundlesTest, PackPrefersOneNodeButMaySplit) {
  ClusterView view{Idle({{"CPU", 4}}), Idle({{"CPU", 4}})};
  BundleDecision together =
      PlaceBundles({kOneCpu, kOneCpu, kOneCpu}, PlacementStrategy::PACK, view);
  ASSERT_EQ(together.outcome, Outcome::kPlaced);
  EXPECT_EQ(std::set<int>(together.node_of_bundle.begin(), together.node_of_bundle.end()).size(),
            1u);

  std::vector<Resources> big{{{"CPU", 3}}, {{"CPU", 3}}};
  BundleDecision split = PlaceBundles(big, PlacementStrategy::PACK, view);
  ASSERT_EQ(split.outcome, Outcome::kPlaced);
  EXPECT_NE(split.node_of_bundle[0], split.node_of_bundle[1]);

  EXPECT_EQ(PlaceBundles(big, PlacementStrategy::STRICT_PACK, view).outcome, Outcome::kInfeasible)
      << "6 CPUs on one 4-CPU node";
}

TEST(PlaceBundlesTest, SpreadUsesDistinctNodesWhenItCan) {
  ClusterView view{Idle({{"CPU", 4}}), Idle({{"CPU", 4}}), Idle({{"CPU", 4}})};
  BundleDecision d = PlaceBundles({kOneCpu, kOneCpu, kOneCpu}, PlacementStrategy::SPREAD, view);
  ASSERT_EQ(d.outcome, Outcome::kPlaced);
  EXPECT_EQ(std::set<int>(d.node_of_bundle.begin(), d.node_of_bundle.end()).size(), 3u);
}

TEST(PlaceBundlesTest, StrictSpreadSearchesBeyondTheFirstFit) {
  // Bundle 0 fits both nodes, bundle 1 only node A: a greedy first fit that gives A to
  // bundle 0 fails, the right answer is B then A.
  ClusterView view{Idle({{"CPU", 1}, {"GPU", 1}}), Idle({{"CPU", 1}})};
  BundleDecision d = PlaceBundles({kOneCpu, {{"GPU", 1}}}, PlacementStrategy::STRICT_SPREAD, view);
  ASSERT_EQ(d.outcome, Outcome::kPlaced) << d.reason;
  EXPECT_THAT(d.node_of_bundle, ElementsAre(1, 0));
}

TEST(PlaceBundlesTest, FeasibleButBusyWaitsAndPlacesNothing) {
  ClusterView view{Node({{"CPU", 4}}, {{"CPU", 1}})};
  BundleDecision d = PlaceBundles({kOneCpu, kOneCpu}, PlacementStrategy::PACK, view);
  EXPECT_EQ(d.outcome, Outcome::kWait);
  EXPECT_TRUE(d.node_of_bundle.empty()) << "all bundles or none";
  EXPECT_FALSE(d.reason.empty());
}

TEST(PlaceBundlesTest, BundleBiggerThanAnyNodeIsInfeasible) {
  ClusterView view{Idle({{"CPU", 4}}), Idle({{"CPU", 8}})};
  BundleDecision d = PlaceBundles({{{"CPU", 1000}}}, PlacementStrategy::PACK, view);
  EXPECT_EQ(d.outcome, Outcome::kInfeasible);
  EXPECT_THAT(d.reason, HasSubstr("CPU"));
}

TEST(PlaceBundlesTest, DeadNodesAreNeverUsed) {
  ClusterView view{Node({{"CPU", 8}}, {{"CPU", 8}}, {}, false), Idle({{"CPU", 2}})};
  BundleDecision d = PlaceBundles({kOneCpu, kOneCpu}, PlacementStrategy::PACK, view);
  ASSERT_EQ(d.outcome, Outcome::kPlaced);
  EXPECT_THAT(d.node_of_bundle, Each(1));
  EXPECT_EQ(PlaceBundles({{{"CPU", 4}}}, PlacementStrategy::PACK, view).outcome,
            Outcome::kInfeasible);
}

TEST(PlaceBundlesTest, SelectorRestrictsNodes) {
  ClusterView view{Idle({{"CPU", 8}}, {{"zone", "a"}}), Idle({{"CPU", 8}}, {{"zone", "b"}})};
  BundleDecision d = PlaceBundles({kOneCpu}, PlacementStrategy::PACK, view, "", {{"zone", "b"}});
  ASSERT_EQ(d.outcome, Outcome::kPlaced);
  EXPECT_THAT(d.node_of_bundle, ElementsAre(1));
  EXPECT_EQ(PlaceBundles({kOneCpu}, PlacementStrategy::PACK, view, "", {{"zone", "c"}}).outcome,
            Outcome::kInfeasible);
}

TEST(PlaceBundlesTest, SameLabelKeepsAllBundlesInOneSlice) {
  const std::string kSlice = "orrery.io/tpu-slice-name";
  ClusterView view{Idle({{"TPU", 4}}, {{kSlice, "s1"}}), Idle({{"TPU", 4}}, {{kSlice, "s2"}}),
                   Idle({{"TPU", 4}}, {{kSlice, "s1"}}), Idle({{"TPU", 4}})};
  std::vector<Resources> hosts{{{"TPU", 4}}, {{"TPU", 4}}};
  BundleDecision d = PlaceBundles(hosts, PlacementStrategy::STRICT_SPREAD, view, kSlice);
  ASSERT_EQ(d.outcome, Outcome::kPlaced) << d.reason;
  EXPECT_EQ(std::set<int>(d.node_of_bundle.begin(), d.node_of_bundle.end()), (std::set<int>{0, 2}));

  // With s1 busy, s2 (one host) and the unlabelled node cannot make up a slice: wait.
  view[2].available = {{"TPU", 0}};
  BundleDecision busy = PlaceBundles(hosts, PlacementStrategy::STRICT_SPREAD, view, kSlice);
  EXPECT_EQ(busy.outcome, Outcome::kWait) << busy.reason;

  // Three hosts: no slice has three.
  std::vector<Resources> three{{{"TPU", 4}}, {{"TPU", 4}}, {{"TPU", 4}}};
  EXPECT_EQ(PlaceBundles(three, PlacementStrategy::STRICT_SPREAD, view, kSlice).outcome,
            Outcome::kInfeasible);
}

// ---- Random clusters: placements respect capacity and strategy ----

TEST(PlaceBundlesContractTest, RandomClusters) {
  std::mt19937 rng(777);
  const PlacementStrategy strategies[] = {PlacementStrategy::PACK, PlacementStrategy::SPREAD,
                                          PlacementStrategy::STRICT_PACK,
                                          PlacementStrategy::STRICT_SPREAD};
  int placed = 0;
  for (int i = 0; i < 3000; ++i) {
    ClusterView view;
    int nodes = int(rng() % 5);
    for (int n = 0; n < nodes; ++n) {
      double cpus = double(1 + rng() % 6);
      view.push_back(
          Node({{"CPU", cpus}}, {{"CPU", double(rng() % (int(cpus) + 1))}}, {}, rng() % 6 != 0));
    }
    std::vector<Resources> bundles(1 + rng() % 4);
    for (auto& b : bundles) b = {{"CPU", double(1 + rng() % 3)}};
    PlacementStrategy s = strategies[rng() % 4];
    BundleDecision d = PlaceBundles(bundles, s, view);
    if (d.outcome != Outcome::kPlaced) {
      EXPECT_TRUE(d.node_of_bundle.empty()) << "iteration " << i;
      continue;
    }
    ++placed;
    ASSERT_EQ(d.node_of_bundle.size(), bundles.size()) << "iteration " << i;
    std::map<int, Resources> used;
    for (size_t b = 0; b < bundles.size(); ++b) {
      int node = d.node_of_bundle[b];
      ASSERT_GE(node, 0);
      ASSERT_LT(node, int(view.size()));
      EXPECT_TRUE(view[node].alive) << "iteration " << i;
      Add(used[node], bundles[b]);
    }
    for (const auto& [node, demand] : used) {
      EXPECT_TRUE(Fits(demand, view[node].available))
          << "iteration " << i << ": node " << node << " overcommitted with " << ToString(demand);
    }
    if (s == PlacementStrategy::STRICT_PACK) {
      EXPECT_EQ(used.size(), 1u) << "iteration " << i;
    }
    if (s == PlacementStrategy::STRICT_SPREAD) {
      EXPECT_EQ(used.size(), bundles.size()) << "iteration " << i;
    }
    if (HasFailure()) return;
  }
  EXPECT_GT(placed, 100) << "the random clusters should place some groups";
}

}  // namespace
}  // namespace orrery::scheduler
