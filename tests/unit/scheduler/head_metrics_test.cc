// The head's metrics (scheduler/src/head_metrics.h): what HeadMetricsText says of the
// managers' state, the node's metrics address in its record, tasks submitted from drivers'
// heartbeats, and training runs' latest metrics from their records (untrusted input).
#include "scheduler/src/head_metrics.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/unit/scheduler/head_harness.h"

namespace orrery::scheduler {
namespace {

using nlohmann::json;
using testing::HeadHarness;

bool Has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

proto::RegisterNodeMsg NodeWithMetrics(const NodeId& id, const std::string& metrics) {
  proto::RegisterNodeMsg m;
  m.node.node_id = id.Binary();
  m.node.address = "tcp://127.0.0.1:1";
  m.node.total = {{"CPU", 4}};
  m.node.metrics_address = metrics;
  m.node_secret = "s3cret";
  return m;
}

TEST(HeadMetricsTest, NodesResourcesAndActorsByState) {
  HeadHarness h;
  std::string node = h.AddNode({{"CPU", 4}, {"GPU", 2}});
  std::string job = h.AddJob();
  h.actors.OnCreate(h.ActorRequest(job, {{"CPU", 1}}), 0);
  h.actors.OnCreate(h.ActorRequest(job, {{"CPU", 100}}), 0);  // never fits: pending
  h.queue.ScheduleAll(0);
  std::string text = HeadMetricsText(h.m, *h.store);
  std::string hex = UniqueId::FromBinary(node).Hex();
  EXPECT_TRUE(Has(text, "orrery_nodes_alive 1")) << text;
  EXPECT_TRUE(Has(text, "orrery_node_resources_total{node=\"" + hex + "\",resource=\"GPU\"} 2"))
      << text;
  EXPECT_TRUE(Has(text, "orrery_node_resources_used{node=\"" + hex + "\",resource=\"CPU\"} 1"))
      << text;
  EXPECT_TRUE(Has(text, "orrery_actors{state=\"PENDING\"} 2")) << text;  // placed, not yet alive
  EXPECT_TRUE(Has(text, "orrery_actors{state=\"ALIVE\"} 0")) << text;
  EXPECT_TRUE(Has(text, "orrery_jobs{state=\"RUNNING\"} 1")) << text;
  EXPECT_TRUE(Has(text, "orrery_placement_groups{state=\"CREATED\"} 0")) << text;
  EXPECT_TRUE(Has(text, "orrery_redis_write_latency_seconds_bucket{le=\"+Inf\"} 0")) << text;
}

TEST(HeadMetricsTest, TasksSubmittedComeFromHeartbeatsAndNeverGoDown) {
  HeadHarness h;
  proto::JobMsg j;
  j.job_id = JobId::Random().Binary();
  j.entrypoint = "/bin/app";
  h.jobs.OnRegister(j, 0);
  j.tasks_submitted = 7;
  h.jobs.OnRegister(j, 1);
  j.tasks_submitted = 3;  // an older heartbeat that arrived late
  h.jobs.OnRegister(j, 2);
  EXPECT_TRUE(Has(HeadMetricsText(h.m, *h.store), "orrery_tasks_submitted_total 7"));
  j.alive = false;  // the goodbye carries the final count, and the job's count stays
  j.tasks_submitted = 9;
  h.jobs.OnRegister(j, 3);
  std::string text = HeadMetricsText(h.m, *h.store);
  EXPECT_TRUE(Has(text, "orrery_tasks_submitted_total 9")) << text;
  EXPECT_TRUE(Has(text, "orrery_jobs{state=\"FINISHED\"} 1")) << text;
}

TEST(HeadMetricsTest, TheNodesMetricsAddressGoesIntoItsRecordWhenItLooksRight) {
  HeadHarness h;
  NodeId good = NodeId::Random(), bad = NodeId::Random();
  int i = -1;
  h.nodes.OnRegister(NodeWithMetrics(good, "127.0.0.1:9100"), 0, &i);
  h.nodes.OnRegister(NodeWithMetrics(bad, "x\"}\n evil:1"), 0, &i);
  EXPECT_EQ(json::parse(h.Table("nodes")[good.Hex()])["metrics_address"], "127.0.0.1:9100");
  EXPECT_EQ(json::parse(h.Table("nodes")[bad.Hex()])["metrics_address"], "");
  // A heartbeat with a new address rewrites the record.
  h.nodes.OnRegister(NodeWithMetrics(good, "127.0.0.1:9200"), 1, &i);
  EXPECT_EQ(json::parse(h.Table("nodes")[good.Hex()])["metrics_address"], "127.0.0.1:9200");
  EXPECT_EQ(json::parse(HeadRecordJson("127.0.0.1:1"))["metrics_address"], "127.0.0.1:1");
}

TEST(HeadMetricsTest, TrainRunsLatestNumericMetricsOnly) {
  HeadHarness h;
  proto::RecordMsg r;
  r.table = "train_runs";
  r.key = "0123456789abcdef0123456789abcdef";
  r.json = json{{"name", "run\"one"},
                {"latest_metrics", {{"loss", 0.25}, {"note", "text"}, {"", 1}, {"acc", nullptr}}}}
               .dump();
  h.records.OnPutRecord(r);
  r.json = json{{"name", "run\"one"}, {"latest_metrics", {{"loss", 0.125}}}}.dump();
  h.records.OnPutRecord(r);
  proto::RecordMsg garbage = r;
  garbage.key = "fedcba9876543210fedcba9876543210";
  garbage.json = R"({"latest_metrics": [1, 2], "name": 5})";
  h.records.OnPutRecord(garbage);
  std::string text = HeadMetricsText(h.m, *h.store);
  EXPECT_TRUE(Has(
      text, "orrery_train_metric{run=\"" + r.key + "\",name=\"run\\\"one\",metric=\"loss\"} 0.125"))
      << text;
  EXPECT_EQ(text.find("metric=\"note\""), std::string::npos) << text;
  EXPECT_EQ(text.find("metric=\"acc\""), std::string::npos) << text;
  EXPECT_EQ(text.find(garbage.key), std::string::npos) << text;
}

TEST(HeadMetricsTest, TrainRunsAreBounded) {
  HeadHarness h;
  for (size_t n = 0; n < DriverRecords::kMaxRuns + 10; ++n) {
    proto::RecordMsg r;
    r.table = "train_runs";
    char key[33];
    std::snprintf(key, sizeof(key), "%032zx", n);
    r.key = key;
    json metrics;
    for (size_t m = 0; m < DriverRecords::kMaxMetricsPerRun + 5; ++m)
      metrics["m" + std::to_string(m)] = double(m);
    r.json = json{{"latest_metrics", metrics}}.dump();
    h.records.OnPutRecord(r);
  }
  EXPECT_EQ(h.records.run_metrics().size(), DriverRecords::kMaxRuns);
  EXPECT_EQ(h.records.run_metrics().count(std::string(32, '0')), 0u);  // the oldest went
  for (const auto& [key, run] : h.records.run_metrics())
    EXPECT_EQ(run.latest.size(), DriverRecords::kMaxMetricsPerRun);
}

}  // namespace
}  // namespace orrery::scheduler
