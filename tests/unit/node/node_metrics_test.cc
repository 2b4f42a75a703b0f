// The node's metrics text (node/src/node_metrics.h): every family, with the node's label.
#include "node/src/node_metrics.h"

#include <gtest/gtest.h>

#include "core/internal/call_stats.h"
#include "tests/fakes/worker_stats.h"

namespace orrery::node {
namespace {

using ::orrery::testing::StatsReport;

TEST(NodeMetricsTest, TextHasEveryFamilyWithTheNodeLabel) {
  NodeCallStats s;
  ASSERT_TRUE(s.Update(StatsReport("a", 4, 1)));
  NodeMetricsInput in;
  in.node_id = "00ff";
  in.worker_kinds = {{"actor", 2}};
  in.object_store.capacity_bytes = 1000;
  in.object_store.used_bytes = 10;
  in.calls = s.Sum();
  std::string text = NodeMetricsText(in);
  for (const char* line :
       {"orrery_worker_processes{node=\"00ff\",kind=\"actor\"} 2",
        "orrery_worker_processes{node=\"00ff\",kind=\"idle\"} 0",
        "orrery_object_store_used_bytes{node=\"00ff\"} 10",
        "orrery_object_store_capacity_bytes{node=\"00ff\"} 1000",
        "orrery_tasks_started_total{node=\"00ff\"} 5",
        "orrery_tasks_finished_total{node=\"00ff\"} 4",
        "orrery_tasks_failed_total{node=\"00ff\"} 1", "orrery_tasks_running{node=\"00ff\"} 0",
        "orrery_call_latency_seconds_bucket{node=\"00ff\",le=\"0.001\"} 5",
        "orrery_call_latency_seconds_bucket{node=\"00ff\",le=\"+Inf\"} 5",
        "orrery_call_latency_seconds_count{node=\"00ff\"} 5"}) {
    EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << line << "\n" << text;
  }
}

}  // namespace
}  // namespace orrery::node
