// The head's side of the autoscaler (scheduler/src/head_autoscaler.h, autoscaler_view.h):
// a demand a group could hold waits instead of failing; one none can hold fails naming the
// groups; the sync lists the waiting demands and the nodes' idle time; only idle nodes are
// removed, and the head remembers them (HeadService ignores their registrations).
#include "scheduler/src/head_autoscaler.h"

#include <gtest/gtest.h>

#include "tests/unit/scheduler/head_harness.h"

namespace orrery::scheduler {
namespace {

using proto::ActorState;
using testing::HeadHarness;

proto::AutoscalerSyncMsg Sync() {
  proto::AutoscalerSyncMsg s;
  proto::AutoscalerGroupMsg g;
  g.name = "cpu4";
  g.resources = {{"CPU", 4}};
  g.max_nodes = 3;
  s.groups.push_back(g);
  s.reply_to = "tcp://autoscaler";
  return s;
}

TEST(HeadAutoscalerTest, ADemandAGroupCouldHoldWaitsAndOneNoneCanHoldFailsNamingThem) {
  HeadHarness h;
  h.AddNode({{"CPU", 2}});
  double t0 = Now();
  AutoscalerSync(h.m, Sync(), t0);
  std::string job = h.AddJob(t0);
  auto three = h.ActorRequest(job, {{"CPU", 3}});
  three.spec.infeasible_timeout_s = 1;
  auto sixteen = h.ActorRequest(job, {{"CPU", 16}});
  sixteen.spec.infeasible_timeout_s = 1;
  h.actors.OnCreate(three, t0);
  h.actors.OnCreate(sixteen, t0);
  h.queue.ScheduleAll(t0 + 2);  // past both timeouts
  EXPECT_NE(h.actors.Find(three.spec.actor_id)->state, ActorState::kDead);
  auto pending = h.Table("pending");
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_NE(pending.begin()->second.find("waiting for the autoscaler to add a node of group "
                                         "'cpu4'"),
            std::string::npos)
      << pending.begin()->second;
  const ActorEntry* big = h.actors.Find(sixteen.spec.actor_id);
  EXPECT_EQ(big->state, ActorState::kDead);
  EXPECT_EQ(big->death_kind, proto::ErrorKind::kInfeasibleError);
  EXPECT_NE(big->death_cause.find("no autoscaler group can hold it either (groups: cpu4 {CPU: 4} "
                                  "(max 3))"),
            std::string::npos)
      << big->death_cause;

  // The sync lists the waiting actor with its bundle.
  auto state = AutoscalerSync(h.m, Sync(), t0 + 2);
  ASSERT_EQ(state.demands.size(), 1u);
  EXPECT_EQ(state.demands[0].kind, "actor");
  EXPECT_EQ(state.demands[0].bundles.at(0).at("CPU"), 3);
}

TEST(HeadAutoscalerTest, WithoutARecentSyncAnInfeasibleDemandFailsAsBefore) {
  HeadHarness h;
  h.AddNode({{"CPU", 2}});
  double t0 = Now();
  auto sync = Sync();
  sync.valid_for_s = 1;
  AutoscalerSync(h.m, sync, t0 - 5);  // expired
  auto three = h.ActorRequest(h.AddJob(t0), {{"CPU", 3}});
  three.spec.infeasible_timeout_s = 1;
  h.actors.OnCreate(three, t0);
  h.queue.ScheduleAll(t0 + 2);
  EXPECT_EQ(h.actors.Find(three.spec.actor_id)->state, ActorState::kDead);
}

TEST(HeadAutoscalerTest, OnlyIdleNodesAreRemovedAndAreRememberedAsRemoved) {
  HeadHarness h;
  std::string busy = h.AddNode({{"CPU", 4}});
  std::string idle = h.AddNode({{"CPU", 4}});
  double t0 = Now();
  h.actors.OnCreate(h.ActorRequest(h.AddJob(t0), {{"CPU", 4}}), t0);
  auto first = AutoscalerSync(h.m, Sync(), t0);
  ASSERT_EQ(first.nodes.size(), 2u);
  auto second = AutoscalerSync(h.m, Sync(), t0 + 7);
  for (const auto& n : second.nodes) {
    bool is_idle = n.node_id == UniqueId::FromBinary(idle).Hex();
    EXPECT_EQ(n.idle_s, is_idle ? 7 : 0) << n.node_id;
  }
  auto remove = Sync();
  remove.remove = {{UniqueId::FromBinary(busy).Hex()}, {UniqueId::FromBinary(idle).Hex()}};
  remove.remove_reasons = {"busy", "idle for 7 s"};
  auto done = AutoscalerSync(h.m, remove, t0 + 8);
  ASSERT_EQ(done.removed.size(), 1u);
  EXPECT_EQ(done.removed[0].at(0), UniqueId::FromBinary(idle).Hex());
  EXPECT_TRUE(h.nodes.alive(h.nodes.Index(busy)));
  EXPECT_FALSE(h.nodes.alive(h.nodes.Index(idle)));
  EXPECT_TRUE(h.m.autoscaler.removed(idle));
}

TEST(HeadAutoscalerTest, MalformedGroupsAndStatusAreIgnored) {
  HeadHarness h;
  h.AddNode({{"CPU", 2}});
  auto sync = Sync();
  sync.groups[0].name = "bad\nname";
  sync.status_json = "[not an object";
  AutoscalerSync(h.m, sync, Now());
  EXPECT_FALSE(h.m.autoscaler.active(Now()));
  EXPECT_TRUE(h.Table("autoscaler").empty());
  sync = Sync();
  sync.status_json = R"({"groups": [], "new_events": [{"group": "cpu4", "action": "scale_up"}]})";
  AutoscalerSync(h.m, sync, Now());
  EXPECT_TRUE(h.m.autoscaler.active(Now()));
  EXPECT_EQ(h.Table("autoscaler").size(), 1u);
}

}  // namespace
}  // namespace orrery::scheduler
