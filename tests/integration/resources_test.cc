// The cluster view (Nodes, ClusterResources, AvailableResources), resource accounting of
// actors, actor-side resource validation and infeasible or busy actor demands.
#include "orrery/resources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "remote_functions.h"
#include "test_support.h"

namespace {

using orrery_test::AvailableCpu;
using orrery_test::kGetTimeoutMs;
using orrery_test::kTestCpus;
using orrery_test::kTestCustom;
using orrery_test::ResourceOr0;
using orrery_test::WaitFor;
using ::testing::HasSubstr;

double AvailableCustom() { return ResourceOr0(orrery::AvailableResources(), "Custom"); }

// Waits until no earlier work holds resources, so a test can count what it takes.
void WaitForIdleCluster() {
  bool idle =
      WaitFor([] { return AvailableCpu() == kTestCpus && AvailableCustom() == kTestCustom; });
  ASSERT_TRUE(idle) << "the cluster never became idle: available "
                    << orrery::ToString(orrery::AvailableResources()) << " of "
                    << orrery::ToString(orrery::ClusterResources());
}

TEST(ClusterInfoTest, NodesDescribeTheEmbeddedNode) {
  std::vector<orrery::NodeInfo> nodes = orrery::Nodes();
  ASSERT_EQ(nodes.size(), 1u);
  const orrery::NodeInfo& node = nodes[0];
  EXPECT_FALSE(node.node_id.IsNil());
  EXPECT_FALSE(node.address.empty());
  EXPECT_TRUE(node.alive);
  EXPECT_EQ(ResourceOr0(node.total, "CPU"), kTestCpus) << "Config::num_cpus";
  EXPECT_EQ(ResourceOr0(node.total, "Custom"), kTestCustom) << "Config::resources";
  EXPECT_LE(ResourceOr0(node.available, "CPU"), kTestCpus);
  auto label = node.labels.find(orrery_test::kTestLabelKey);
  ASSERT_NE(label, node.labels.end()) << "Config::labels";
  EXPECT_EQ(label->second, orrery_test::kTestLabelValue);
  // The node's memory monitor reads this host.
  EXPECT_DOUBLE_EQ(node.memory_usage_threshold, orrery_test::kTestMemoryUsageThreshold)
      << "Config::memory_usage_threshold";
  EXPECT_GT(node.memory_total_bytes, 0);
  EXPECT_GT(node.memory_used_bytes, 0);
  EXPECT_LE(node.memory_used_bytes, node.memory_total_bytes);
}

TEST(ClusterInfoTest, ClusterAndAvailableResources) {
  orrery::Resources total = orrery::ClusterResources();
  EXPECT_EQ(ResourceOr0(total, "CPU"), kTestCpus);
  EXPECT_EQ(ResourceOr0(total, "Custom"), kTestCustom);
  orrery::Resources available = orrery::AvailableResources();
  for (const auto& [name, amount] : available) {
    EXPECT_GE(amount, 0) << name;
    EXPECT_LE(amount, ResourceOr0(total, name)) << name;
  }
  WaitForIdleCluster();
}

TEST(ResourceAccountingTest, ActorHoldsItsResourcesUntilKilled) {
  WaitForIdleCluster();
  orrery_test::ActorReaper reaper;
  auto c = reaper.Add(orrery::Actor(Counter::Create).SetResources({{"CPU", 1}}).Remote(0));
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 1);
  EXPECT_TRUE(WaitFor([] { return AvailableCpu() == kTestCpus - 1; }))
      << "available CPU " << AvailableCpu();
  // Calls do not take more.
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 2);
  EXPECT_EQ(AvailableCpu(), kTestCpus - 1);
  // Node view agrees with the cluster view.
  EXPECT_EQ(ResourceOr0(orrery::Nodes().at(0).available, "CPU"), kTestCpus - 1);

  c.Kill();
  EXPECT_TRUE(WaitFor([] { return AvailableCpu() == kTestCpus; }))
      << "the killed actor's CPU was not returned: " << AvailableCpu();
}

TEST(ResourceAccountingTest, CustomAndFractionalResources) {
  WaitForIdleCluster();
  orrery_test::ActorReaper reaper;
  auto a = reaper.Add(
      orrery::Actor(Counter::Create).SetResources({{"Custom", 1}, {"CPU", 0.5}}).Remote(0));
  auto b = reaper.Add(orrery::Actor(Counter::Create).SetResources({{"CPU", 0.25}}).Remote(0));
  EXPECT_EQ(*orrery::Get(a.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 1);
  EXPECT_EQ(*orrery::Get(b.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 1);
  EXPECT_TRUE(WaitFor([] {
    return AvailableCustom() == kTestCustom - 1 && AvailableCpu() == kTestCpus - 0.75;
  })) << orrery::ToString(orrery::AvailableResources());
  a.Kill();
  b.Kill();
  EXPECT_TRUE(WaitFor([] {
    return AvailableCustom() == kTestCustom && AvailableCpu() == kTestCpus;
  })) << orrery::ToString(orrery::AvailableResources());
}

TEST(ResourceAccountingTest, BusyDemandWaitsAndRunsWhenFreed) {
  WaitForIdleCluster();
  orrery_test::ActorReaper reaper;
  auto holder =
      reaper.Add(orrery::Actor(Counter::Create).SetResources({{"Custom", kTestCustom}}).Remote(0));
  EXPECT_EQ(*orrery::Get(holder.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 1);
  auto waiter = reaper.Add(orrery::Actor(Counter::Create).SetResources({{"Custom", 1}}).Remote(7));
  auto call = waiter.Task(&Counter::Value).Remote();
  // Feasible but busy: it waits (past infeasible_timeout_s = 0.5) instead of failing.
  EXPECT_THROW(orrery::Get(call, 1500), orrery::GetTimeoutError);
  holder.Kill();
  EXPECT_EQ(*orrery::Get(call, kGetTimeoutMs), 7);
}

TEST(LabelSelectorTest, MatchingSelectorRunsAndOtherwiseInfeasible) {
  orrery_test::ActorReaper reaper;
  auto on_label =
      reaper.Add(orrery::Actor(Counter::Create)
                     .SetLabelSelector({{orrery_test::kTestLabelKey, orrery_test::kTestLabelValue}})
                     .Remote(4));
  EXPECT_EQ(*orrery::Get(on_label.Task(&Counter::Value).Remote(), kGetTimeoutMs), 4);
  EXPECT_EQ(*orrery::Get(
                orrery::Task(Add)
                    .SetLabelSelector({{orrery_test::kTestLabelKey, orrery_test::kTestLabelValue}})
                    .Remote(1, 1),
                kGetTimeoutMs),
            2);
  auto nowhere = reaper.Add(orrery::Actor(Counter::Create)
                                .SetLabelSelector({{orrery_test::kTestLabelKey, "elsewhere"}})
                                .Remote(0));
  EXPECT_THROW(orrery::Get(nowhere.Task(&Counter::Value).Remote(), kGetTimeoutMs),
               orrery::InfeasibleError);
}

TEST(SchedulingStrategyTest, StrategiesOnTheEmbeddedNode) {
  orrery::NodeId node = orrery::Nodes().at(0).node_id;
  orrery_test::ActorReaper reaper;
  auto pinned =
      reaper.Add(orrery::Actor(Counter::Create)
                     .SetSchedulingStrategy(orrery::NodeAffinitySchedulingStrategy{node, false})
                     .Remote(1));
  EXPECT_EQ(*orrery::Get(pinned.Task(&Counter::Value).Remote(), kGetTimeoutMs), 1);
  EXPECT_EQ(
      *orrery::Get(
          orrery::Task(Add).SetSchedulingStrategy(orrery::SpreadSchedulingStrategy{}).Remote(1, 2),
          kGetTimeoutMs),
      3);
  EXPECT_EQ(
      *orrery::Get(
          orrery::Task(Add).SetSchedulingStrategy(orrery::DefaultSchedulingStrategy{}).Remote(2, 2),
          kGetTimeoutMs),
      4);
  // Soft affinity to a node that does not exist falls back to the embedded node.
  orrery::NodeId nowhere = orrery::NodeId::Random();
  EXPECT_EQ(
      *orrery::Get(orrery::Task(Add)
                       .SetSchedulingStrategy(orrery::NodeAffinitySchedulingStrategy{nowhere, true})
                       .Remote(3, 3),
                   kGetTimeoutMs),
      6);
  // Hard affinity to it can never be met.
  EXPECT_THROW(
      orrery::Get(orrery::Task(Add)
                      .SetSchedulingStrategy(orrery::NodeAffinitySchedulingStrategy{nowhere, false})
                      .Remote(1, 1),
                  kGetTimeoutMs),
      orrery::InfeasibleError);
  auto lost =
      reaper.Add(orrery::Actor(Counter::Create)
                     .SetSchedulingStrategy(orrery::NodeAffinitySchedulingStrategy{nowhere, false})
                     .Remote(0));
  EXPECT_THROW(orrery::Get(lost.Task(&Counter::Value).Remote(), kGetTimeoutMs),
               orrery::InfeasibleError);
}

TEST(ActorResourcesTest, InvalidResourcesAreConfigErrorAtSubmission) {
  for (const orrery::Resources& bad :
       {orrery::Resources{{"CPU", 1.5}}, orrery::Resources{{"", 1}}, orrery::Resources{{"GPU", 0}},
        orrery::Resources{{"CPU", -1}}}) {
    EXPECT_THROW(orrery::Actor(Counter::Create).SetResources(bad).Remote(0), orrery::ConfigError)
        << orrery::ToString(bad);
  }
}

TEST(ActorResourcesTest, InfeasibleActorIsInfeasibleError) {
  for (const orrery::Resources& demand :
       {orrery::Resources{{"CPU", 1000}}, orrery::Resources{{"Foo", 1}}}) {
    orrery_test::ActorReaper reaper;
    try {
      auto a = reaper.Add(orrery::Actor(Counter::Create).SetResources(demand).Remote(0));
      orrery::Get(a.Task(&Counter::Value).Remote(), kGetTimeoutMs);
      ADD_FAILURE() << "expected InfeasibleError for " << orrery::ToString(demand);
    } catch (const orrery::InfeasibleError& e) {
      EXPECT_THAT(e.what(), HasSubstr(demand.begin()->first));
    }
  }
}

}  // namespace
