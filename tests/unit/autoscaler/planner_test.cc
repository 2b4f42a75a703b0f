// The autoscaler's config parser and planner (autoscaler/src/config.h, planner.h): which
// groups grow for which demands, by how much, and which idle nodes go.
#include "autoscaler/src/planner.h"

#include <gtest/gtest.h>

namespace orrery::autoscaler {
namespace {

Config Parse(const std::string& yaml) {
  auto c = ParseConfig(yaml);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? c.value() : Config{};
}

const char* kCpu = R"(groups:
  - name: cpu4
    resources: {CPU: 4}
    max: 3
    idle_timeout_s: 10
)";

proto::PendingDemandMsg Actor(double cpus) {
  proto::PendingDemandMsg d;
  d.id = "0123456789abcdef";
  d.kind = "actor";
  d.bundles = {{{"CPU", cpus}}};
  return d;
}

proto::AutoscalerNodeMsg Node(const std::string& group, const std::string& name, double free,
                              double idle_s, const std::string& slice = "") {
  proto::AutoscalerNodeMsg n;
  n.node_id = name + "-id";
  n.total = {{"CPU", 4}};
  n.available = {{"CPU", free}};
  if (!group.empty()) {
    n.labels[kGroupLabel] = group;
    n.labels[kNodeLabel] = name;
  }
  if (!slice.empty()) n.labels["orrery.io/tpu-slice-name"] = slice;
  n.idle_s = idle_s;
  return n;
}

TEST(AutoscalerPlanTest, AddsTheFewestNodesThatHoldTheWaitingDemands) {
  Config c = Parse(kCpu);
  std::vector<proto::PendingDemandMsg> demands = {Actor(2), Actor(2), Actor(2)};
  Plan p = PlanScaleUp(c, {Node("", "head", 0, 0)}, demands, {});
  ASSERT_EQ(p.add.size(), 1u);
  EXPECT_EQ(p.add[0].group, "cpu4");
  EXPECT_EQ(p.add[0].count, 2) << "6 CPUs in 4-CPU nodes";
  EXPECT_TRUE(p.unsatisfiable.empty());
}

TEST(AutoscalerPlanTest, CountsFreeRoomAndNodesAlreadyLaunching) {
  Config c = Parse(kCpu);
  std::vector<proto::PendingDemandMsg> demands = {Actor(2), Actor(2), Actor(2)};
  // 2 CPUs free on a node: two actors of 2 are left, and one node is on its way.
  Plan p = PlanScaleUp(c, {Node("", "head", 2, 0)}, demands, {{"cpu4", {"cpu4-0"}}});
  EXPECT_TRUE(p.add.empty());
}

TEST(AutoscalerPlanTest, NeverGoesAboveMaxAndNamesDemandsNoGroupCanHold) {
  Config c = Parse(kCpu);
  std::vector<proto::PendingDemandMsg> demands;
  for (int i = 0; i < 10; ++i) demands.push_back(Actor(4));
  demands.push_back(Actor(16));
  Plan p = PlanScaleUp(c, {}, demands, {});
  ASSERT_EQ(p.add.size(), 1u);
  EXPECT_EQ(p.add[0].count, 3);
  ASSERT_EQ(p.unsatisfiable.size(), 1u);
  EXPECT_NE(p.unsatisfiable[0].find("{CPU: 16}"), std::string::npos) << p.unsatisfiable[0];
}

TEST(AutoscalerPlanTest, BringsGroupsUpToMin) {
  Config c = Parse("groups:\n  - name: a\n    resources: {CPU: 1}\n    min: 2\n    max: 4\n");
  Plan p = PlanScaleUp(c, {Node("a", "a-0", 1, 0)}, {}, {});
  ASSERT_EQ(p.add.size(), 1u);
  EXPECT_EQ(p.add[0].count, 1);
  EXPECT_EQ(p.add[0].reason, "min 2");
}

TEST(AutoscalerPlanTest, ATpuGroupAddsAWholeSliceForASliceReservation) {
  Config c = Parse(R"(groups:
  - name: tpu
    tpu: {accelerator_type: v4-16, topology: 2x2x2}
    max: 2
)");
  ASSERT_EQ(c.groups.size(), 1u);
  EXPECT_EQ(c.groups[0].hosts(), 2);
  proto::PendingDemandMsg pg;
  pg.id = "fedcba9876543210";
  pg.kind = "placement_group";
  pg.bundles = {{{"TPU", 4}, {"TPU-v4-16-head", 1}}, {{"TPU", 4}}};
  pg.strategy = "STRICT_SPREAD";
  pg.same_label = "orrery.io/tpu-slice-name";
  Plan p = PlanScaleUp(c, {}, {pg}, {});
  ASSERT_EQ(p.add.size(), 1u);
  EXPECT_EQ(p.add[0].count, 1) << "one slice of two hosts";
}

TEST(AutoscalerPlanTest, RemovesIdleNodesHighestFirstNeverBelowMinNorPastABusyOne) {
  Config c = Parse(
      "groups:\n  - name: a\n    resources: {CPU: 4}\n    min: 1\n    max: 4\n"
      "    idle_timeout_s: 10\n");
  std::vector<proto::AutoscalerNodeMsg> nodes = {Node("a", "a-0", 4, 99), Node("a", "a-1", 4, 99),
                                                 Node("a", "a-2", 4, 99)};
  auto downs = PlanScaleDown(c, nodes, {});
  ASSERT_EQ(downs.size(), 2u) << "min 1 keeps a-0";
  EXPECT_EQ(downs[0].names[0], "a-2");
  EXPECT_EQ(downs[1].names[0], "a-1");
  EXPECT_NE(downs[0].reason.find("idle for 99 s"), std::string::npos) << downs[0].reason;

  nodes[2].idle_s = 0;  // a-2 is busy: a StatefulSet cannot drop a-1 before it
  EXPECT_TRUE(PlanScaleDown(c, nodes, {}).empty());
  nodes[2].idle_s = 5;  // idle, but not for long enough
  EXPECT_TRUE(PlanScaleDown(c, nodes, {}).empty());
}

TEST(AutoscalerPlanTest, ASliceGoesOnlyWhenAllItsHostsAreIdle) {
  Config c = Parse(R"(groups:
  - name: tpu
    tpu: {accelerator_type: v4-16, topology: 2x2x2}
    max: 2
    idle_timeout_s: 10
)");
  std::vector<proto::AutoscalerNodeMsg> nodes = {Node("tpu", "tpu-0-0", 4, 50, "tpu-0"),
                                                 Node("tpu", "tpu-0-1", 4, 3, "tpu-0")};
  EXPECT_TRUE(PlanScaleDown(c, nodes, {}).empty());
  nodes[1].idle_s = 20;
  auto downs = PlanScaleDown(c, nodes, {});
  ASSERT_EQ(downs.size(), 1u);
  EXPECT_EQ(downs[0].slice, "tpu-0");
  EXPECT_EQ(downs[0].node_ids.size(), 2u);
}

TEST(AutoscalerConfigTest, RefusesBadConfigsSayingWhatToChange) {
  struct Case {
    const char* yaml;
    const char* says;
  } cases[] = {
      {"groups:\n  - name: a\n    resources: {CPU: 1}\n    max: 1\n    colour: red\n",
       "unknown field 'colour'"},
      {"groups:\n  - name: a\n    resources: {CPU: 1}\n    min: 3\n    max: 1\n",
       "max (1) is below min (3): raise max or lower min"},
      {"groups:\n  - name: t\n    tpu: {accelerator_type: v4-16, topology: 2x2x2, hosts: 4}\n"
       "    max: 1\n",
       "has 2 host(s), not 4: set hosts: 2"},
      {"groups:\n  - name: t\n    tpu: {accelerator_type: v4-32, topology: 2x2x2}\n    max: 1\n",
       "makes a v4-16 slice, not v4-32"},
      {"groups:\n  - name: a\n    resources: {CPU: many}\n    max: 1\n", "must be a number"},
      {"groups:\n  - name: A_B\n    resources: {CPU: 1}\n    max: 1\n", "must be 1-63 of a-z"},
      {"groups:\n  - name: a\n    resources: {CPU: 1}\n    max: 1\n  - name: a\n"
       "    resources: {CPU: 1}\n    max: 1\n",
       "is named twice"},
      {"provider: {type: command, create: x}\ngroups:\n  - name: a\n    resources: {CPU: 1}\n"
       "    max: 1\n",
       "needs both create and delete"},
      {"groups: [", "not valid YAML"},
      {"groups: []\n", "needs groups"},
  };
  for (const auto& c : cases) {
    auto r = ParseConfig(c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos)
        << r.status().message() << " (wanted: " << c.says << ")";
  }
}

}  // namespace
}  // namespace orrery::autoscaler
