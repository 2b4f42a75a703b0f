// The pure scheduling policies (orrery/scheduler/policy.h): label selectors, hybrid, spread
// and node affinity. Hand-built cluster views, plus a randomized check of the contract
// every policy shares: placed means it fits now, infeasible means it never could, wait
// means it could but not now.
#include "orrery/scheduler/policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "orrery/resources.h"
#include "tests/unit/scheduler/node_builders.h"

namespace orrery::scheduler {
namespace {

using ::testing::HasSubstr;

using test_nodes::Idle;
using test_nodes::Node;

Demand Want(Resources r, Labels selector = {}) {
  Demand d;
  d.resources = std::move(r);
  d.label_selector = std::move(selector);
  return d;
}

// ---- Label selectors ----

TEST(MatchesSelectorTest, EmptySelectorMatchesEveryNode) {
  EXPECT_TRUE(MatchesSelector({}, {}));
  EXPECT_TRUE(MatchesSelector({{"a", "b"}}, {}));
}

TEST(MatchesSelectorTest, Equality) {
  Labels labels{{"orrery.io/accelerator-type", "TPU-V4"}, {"zone", "us-a"}};
  EXPECT_TRUE(MatchesSelector(labels, {{"orrery.io/accelerator-type", "TPU-V4"}}));
  EXPECT_TRUE(
      MatchesSelector(labels, {{"orrery.io/accelerator-type", "TPU-V4"}, {"zone", "us-a"}}));
  EXPECT_FALSE(MatchesSelector(labels, {{"orrery.io/accelerator-type", "TPU-V5"}}));
  EXPECT_FALSE(
      MatchesSelector(labels, {{"orrery.io/accelerator-type", "TPU-V4"}, {"zone", "us-b"}}));
  EXPECT_FALSE(MatchesSelector(labels, {{"missing", "x"}}));
}

TEST(MatchesSelectorTest, InAndNotIn) {
  Labels labels{{"zone", "us-b"}};
  EXPECT_TRUE(MatchesSelector(labels, {{"zone", "in(us-a,us-b)"}}));
  EXPECT_TRUE(MatchesSelector(labels, {{"zone", "in(us-a, us-b)"}}));
  EXPECT_FALSE(MatchesSelector(labels, {{"zone", "in(us-a,us-c)"}}));
  EXPECT_FALSE(MatchesSelector({}, {{"zone", "in(us-a,us-b)"}}));
  EXPECT_FALSE(MatchesSelector(labels, {{"zone", "!in(us-a,us-b)"}}));
  EXPECT_TRUE(MatchesSelector(labels, {{"zone", "!in(us-a,us-c)"}}));
  EXPECT_TRUE(MatchesSelector({}, {{"zone", "!in(us-a)"}}))
      << "a node without the label is not in the list";
}

// ---- Hybrid (default) ----

TEST(HybridPolicyTest, EmptyClusterIsInfeasible) {
  Decision d = ScheduleHybrid(Want({{"CPU", 1}}), {});
  EXPECT_EQ(d.outcome, Outcome::kInfeasible);
  EXPECT_FALSE(d.reason.empty());
}

TEST(HybridPolicyTest, PlacesOnTheOnlyNode) {
  Decision d = ScheduleHybrid(Want({{"CPU", 1}}), {Idle({{"CPU", 4}})});
  EXPECT_EQ(d.outcome, Outcome::kPlaced);
  EXPECT_EQ(d.node_index, 0);
}

TEST(HybridPolicyTest, TooBigForEveryNodeIsInfeasibleNamingDemandAndLargestNode) {
  ClusterView view{Idle({{"CPU", 4}}), Idle({{"CPU", 8}, {"GPU", 1}})};
  Decision d = ScheduleHybrid(Want({{"CPU", 1000}}), view);
  EXPECT_EQ(d.outcome, Outcome::kInfeasible);
  EXPECT_THAT(d.reason, HasSubstr("1000"));
  EXPECT_THAT(d.reason, HasSubstr("8")) << "what the largest node offers";
  Decision unknown = ScheduleHybrid(Want({{"Foo", 1}}), view);
  EXPECT_EQ(unknown.outcome, Outcome::kInfeasible);
  EXPECT_THAT(unknown.reason, HasSubstr("Foo"));
}

TEST(HybridPolicyTest, BusyButFeasibleWaits) {
  ClusterView view{Node({{"CPU", 4}}, {{"CPU", 0.5}})};
  Decision d = ScheduleHybrid(Want({{"CPU", 1}}), view);
  EXPECT_EQ(d.outcome, Outcome::kWait);
  EXPECT_FALSE(d.reason.empty());
  EXPECT_EQ(d.node_index, -1);
}

TEST(HybridPolicyTest, DeadNodesAreNeverUsed) {
  ClusterView view{Node({{"CPU", 4}}, {{"CPU", 4}}, {}, /*alive=*/false)};
  EXPECT_EQ(ScheduleHybrid(Want({{"CPU", 1}}), view).outcome, Outcome::kInfeasible);
  view.push_back(Idle({{"CPU", 1}}));
  Decision d = ScheduleHybrid(Want({{"CPU", 1}}), view);
  EXPECT_EQ(d.outcome, Outcome::kPlaced);
  EXPECT_EQ(d.node_index, 1);
}

TEST(HybridPolicyTest, PacksOntoTheFirstNodeWhileItIsLightlyUsed) {
  ClusterView view{Idle({{"CPU", 8}}), Idle({{"CPU", 8}}), Idle({{"CPU", 8}})};
  EXPECT_EQ(ScheduleHybrid(Want({{"CPU", 1}}), view).node_index, 0);
  view[0].available = {{"CPU", 7}};  // 1/8 used
  EXPECT_EQ(ScheduleHybrid(Want({{"CPU", 1}}), view).node_index, 0);
}

TEST(HybridPolicyTest, SpreadsToTheLeastUsedNodeOnceTheFirstIsBusy) {
  ClusterView view{Node({{"CPU", 8}}, {{"CPU", 1}}), Node({{"CPU", 8}}, {{"CPU", 4}}),
                   Node({{"CPU", 8}}, {{"CPU", 6}})};
  Decision d = ScheduleHybrid(Want({{"CPU", 1}}), view, /*spread_threshold=*/0.5);
  EXPECT_EQ(d.outcome, Outcome::kPlaced);
  EXPECT_EQ(d.node_index, 2) << "node 0 is 7/8 used, node 1 half, node 2 a quarter";
}

TEST(HybridPolicyTest, SkipsNodesWithoutTheResource) {
  ClusterView view{Idle({{"CPU", 8}}), Idle({{"CPU", 8}, {"GPU", 2}})};
  Decision d = ScheduleHybrid(Want({{"GPU", 1}}), view);
  EXPECT_EQ(d.outcome, Outcome::kPlaced);
  EXPECT_EQ(d.node_index, 1);
}

TEST(HybridPolicyTest, LabelSelectorRestrictsNodes) {
  ClusterView view{Idle({{"TPU", 4}}, {{"orrery.io/accelerator-type", "TPU-V5"}}),
                   Idle({{"TPU", 4}}, {{"orrery.io/accelerator-type", "TPU-V4"}})};
  Decision d = ScheduleHybrid(Want({{"TPU", 4}}, {{"orrery.io/accelerator-type", "TPU-V4"}}), view);
  EXPECT_EQ(d.outcome, Outcome::kPlaced);
  EXPECT_EQ(d.node_index, 1);
  Decision none =
      ScheduleHybrid(Want({{"TPU", 4}}, {{"orrery.io/accelerator-type", "TPU-V6"}}), view);
  EXPECT_EQ(none.outcome, Outcome::kInfeasible);
  EXPECT_THAT(none.reason, HasSubstr("TPU-V6"));
}

TEST(HybridPolicyTest, EmptyDemandGoesToAnAliveNode) {
  ClusterView view{Node({{"CPU", 1}}, {{"CPU", 1}}, {}, false), Idle({{"CPU", 1}})};
  Decision d = ScheduleHybrid(Want({}), view);
  EXPECT_EQ(d.outcome, Outcome::kPlaced);
  EXPECT_EQ(d.node_index, 1);
}

// ---- Spread ----

TEST(SpreadPolicyTest, ChoosesTheLeastUsedNode) {
  ClusterView view{Node({{"CPU", 4}}, {{"CPU", 1}}), Node({{"CPU", 4}}, {{"CPU", 3}}),
                   Node({{"CPU", 4}}, {{"CPU", 2}})};
  for (size_t hint = 0; hint < 3; ++hint) {
    Decision d = ScheduleSpread(Want({{"CPU", 1}}), view, hint);
    EXPECT_EQ(d.outcome, Outcome::kPlaced);
    EXPECT_EQ(d.node_index, 1) << "hint " << hint;
  }
}

TEST(SpreadPolicyTest, HintBreaksTiesSoEqualNodesAllGetWork) {
  ClusterView view{Idle({{"CPU", 4}}), Idle({{"CPU", 4}}), Idle({{"CPU", 4}})};
  std::set<int> chosen;
  for (size_t hint = 0; hint < 3; ++hint)
    chosen.insert(ScheduleSpread(Want({{"CPU", 1}}), view, hint).node_index);
  EXPECT_EQ(chosen, (std::set<int>{0, 1, 2}));
}

TEST(SpreadPolicyTest, WaitAndInfeasible) {
  ClusterView view{Node({{"CPU", 2}}, {{"CPU", 0}})};
  EXPECT_EQ(ScheduleSpread(Want({{"CPU", 1}}), view).outcome, Outcome::kWait);
  EXPECT_EQ(ScheduleSpread(Want({{"CPU", 3}}), view).outcome, Outcome::kInfeasible);
}

// ---- Node affinity ----

TEST(NodeAffinityPolicyTest, HardAffinityUsesOnlyThatNode) {
  ClusterView view{Idle({{"CPU", 8}}), Node({{"CPU", 8}}, {{"CPU", 2}})};
  Demand d = Want({{"CPU", 1}});
  d.strategy = SchedulingStrategy::kNodeAffinity;
  d.affinity_node = view[1].id;
  Decision placed = ScheduleNodeAffinity(d, view);
  EXPECT_EQ(placed.outcome, Outcome::kPlaced);
  EXPECT_EQ(placed.node_index, 1) << "even though node 0 is idler";
  EXPECT_EQ(Schedule(d, view).node_index, 1) << "Schedule dispatches on the strategy";

  view[1].available = {{"CPU", 0}};
  EXPECT_EQ(ScheduleNodeAffinity(d, view).outcome, Outcome::kWait);

  view[1].alive = false;
  EXPECT_EQ(ScheduleNodeAffinity(d, view).outcome, Outcome::kInfeasible);

  d.affinity_node = NodeId::Random();
  EXPECT_EQ(ScheduleNodeAffinity(d, view).outcome, Outcome::kInfeasible) << "an unknown node";
}

TEST(NodeAffinityPolicyTest, SoftAffinityFallsBack) {
  ClusterView view{Idle({{"CPU", 8}}), Node({{"CPU", 8}}, {{"CPU", 8}}, {}, /*alive=*/false)};
  Demand d = Want({{"CPU", 1}});
  d.strategy = SchedulingStrategy::kNodeAffinity;
  d.affinity_node = view[1].id;
  d.affinity_soft = true;
  Decision dead_target = ScheduleNodeAffinity(d, view);
  EXPECT_EQ(dead_target.outcome, Outcome::kPlaced);
  EXPECT_EQ(dead_target.node_index, 0);

  view[1].alive = true;
  EXPECT_EQ(ScheduleNodeAffinity(d, view).node_index, 1) << "the preferred node when it can";
}

// ---- The shared contract, on random clusters ----

ClusterView RandomView(std::mt19937& rng) {
  ClusterView view;
  int nodes = int(rng() % 5);
  for (int i = 0; i < nodes; ++i) {
    Resources total{{"CPU", double(1 + rng() % 8)}};
    if (rng() % 3 == 0) total["GPU"] = double(1 + rng() % 4);
    Resources avail;
    for (const auto& [k, v] : total) avail[k] = double(rng() % (int(v) + 1));
    Labels labels;
    if (rng() % 2) labels["zone"] = rng() % 2 ? "a" : "b";
    view.push_back(Node(total, avail, labels, rng() % 5 != 0));
  }
  return view;
}

Demand RandomDemand(std::mt19937& rng) {
  Demand d;
  d.resources["CPU"] = double(1 + rng() % 6);
  if (rng() % 4 == 0) d.resources["GPU"] = double(1 + rng() % 3);
  if (rng() % 4 == 0) d.label_selector["zone"] = "a";
  return d;
}

void CheckContract(const Demand& demand, const ClusterView& view, const Decision& d,
                   const char* policy) {
  bool ever = false, now = false;
  for (const auto& n : view) {
    if (!n.alive || !MatchesSelector(n.labels, demand.label_selector)) continue;
    ever |= Fits(demand.resources, n.total);
    now |= Fits(demand.resources, n.total) && Fits(demand.resources, n.available);
  }
  switch (d.outcome) {
    case Outcome::kPlaced: {
      ASSERT_GE(d.node_index, 0) << policy;
      ASSERT_LT(d.node_index, int(view.size())) << policy;
      const NodeView& n = view[d.node_index];
      EXPECT_TRUE(n.alive) << policy;
      EXPECT_TRUE(MatchesSelector(n.labels, demand.label_selector)) << policy;
      EXPECT_TRUE(Fits(demand.resources, n.available)) << policy;
      break;
    }
    case Outcome::kWait:
      EXPECT_TRUE(ever) << policy << ": waits for something that can never fit";
      EXPECT_FALSE(now) << policy << ": waits although a node has room now";
      break;
    case Outcome::kInfeasible:
      EXPECT_FALSE(ever) << policy << ": infeasible although a node could hold it";
      break;
  }
}

TEST(PolicyContractTest, RandomClusters) {
  std::mt19937 rng(12345);
  for (int i = 0; i < 3000; ++i) {
    ClusterView view = RandomView(rng);
    Demand demand = RandomDemand(rng);
    CheckContract(demand, view, ScheduleHybrid(demand, view), "hybrid");
    CheckContract(demand, view, ScheduleSpread(demand, view, size_t(i)), "spread");
    CheckContract(demand, view, Schedule(demand, view), "default");
    if (HasFailure()) {
      ADD_FAILURE() << "first failure at iteration " << i;
      return;
    }
  }
}

TEST(HybridPolicyTest, FromACandidateDecidesAsTheFullScanWhenTheNodesBeforeItAreFull) {
  ClusterView view{Node({{"CPU", 4}}, {{"CPU", 1}}), Node({{"CPU", 4}}, {{"CPU", 2}}),
                   Node({{"CPU", 4}}, {{"CPU", 4}}), Idle({{"CPU", 4}})};
  Demand d{{{"CPU", 1}}};
  ClusterViewList nodes(view);
  Decision full = ScheduleHybrid(d, view);
  ASSERT_EQ(full.node_index, 2);
  for (size_t from = 0; from <= 2; ++from)
    EXPECT_EQ(ScheduleHybridFrom(d, nodes, from).node_index, 2) << "from " << from;
  // Past every node below the threshold: the full decision (the least utilised), not a miss.
  EXPECT_EQ(ScheduleHybridFrom(d, nodes, 4).node_index, full.node_index);
  view[2].available = {{"CPU", 1}};
  view[3].available = {{"CPU", 1}};
  EXPECT_EQ(ScheduleHybridFrom(d, nodes, 3).node_index, ScheduleHybrid(d, view).node_index);
  EXPECT_EQ(ScheduleHybrid(d, view).node_index, 1);  // none below half: the least utilised
}

}  // namespace
}  // namespace orrery::scheduler
