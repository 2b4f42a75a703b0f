// The training run record and metrics stream entries (train/src/run_record.h) against
// docs/redis-schema.md "train_runs" and "train:<run>:metrics": field names and JSON types.
#include "train/src/run_record.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>

namespace orrery::train {
namespace {

using nlohmann::json;

RunRecord SampleRecord() {
  RunRecord r;
  r.id = "0123456789abcdef0123456789abcdef";
  r.name = "tpu_training";
  r.status = "RUNNING";
  r.loop = "TrainLoop";
  r.path = "/tmp/orrery_runs/tpu_training";
  r.backend = "gloo";
  r.start_time = 1700000000.25;
  r.end_time = 0;
  r.num_failures = 1;
  r.iterations = 12;
  r.config = ConfigJson(ScalingConfig{.num_workers = 2}, TorchConfig{},
                        RunConfig{.name = "tpu_training"}, json{{"lr", 0.1}});
  r.workers = {RunWorkerRecord{0, 0, 0, "node-a", "10.0.0.1", "host-a", 1234, "cpu"},
               RunWorkerRecord{1, 0, 1, "node-b", "10.0.0.2", "host-b", 5678, "cpu"}};
  r.checkpoints = {
      KeptCheckpoint{4, "/tmp/orrery_runs/tpu_training/checkpoint_000005", {{"loss", 0.5}}}};
  r.latest_metrics = {{"loss", 0.25}, {"step", 12}};
  return r;
}

TEST(RunRecord, HasExactlyTheDocumentedFields) {
  json j = json::parse(SampleRecord().ToJson());
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  EXPECT_EQ(keys,
            (std::set<std::string>{"id", "name", "status", "loop", "path", "backend", "start_time",
                                   "end_time", "num_failures", "iterations", "config", "workers",
                                   "checkpoints", "latest_metrics", "error_kind", "error"}));
}

TEST(RunRecord, StoresTheErrorKindByItsName) {
  RunRecord r = SampleRecord();
  r.error_kind = proto::ErrorKind::kInfeasibleError;
  r.error = "the cluster can hold 1 of the 2 workers";
  json j = json::parse(r.ToJson());
  EXPECT_EQ(j.at("error_kind"), "InfeasibleError");
  EXPECT_EQ(j.at("error"), "the cluster can hold 1 of the 2 workers");
}

TEST(RunRecord, FieldsHaveTheDocumentedTypes) {
  json j = json::parse(SampleRecord().ToJson());
  for (const char* s : {"id", "name", "status", "loop", "path", "backend", "error_kind", "error"}) {
    EXPECT_TRUE(j.at(s).is_string()) << s;
  }
  EXPECT_EQ(j.at("id"), "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(j.at("error_kind"), "");
  EXPECT_TRUE(j.at("start_time").is_number());
  EXPECT_DOUBLE_EQ(j.at("start_time").get<double>(), 1700000000.25);
  EXPECT_TRUE(j.at("end_time").is_number());
  EXPECT_EQ(j.at("end_time").get<double>(), 0);
  EXPECT_TRUE(j.at("num_failures").is_number_integer());
  EXPECT_EQ(j.at("num_failures"), 1);
  EXPECT_TRUE(j.at("iterations").is_number_integer());
  EXPECT_EQ(j.at("iterations"), 12);

  ASSERT_TRUE(j.at("config").is_object());
  for (const char* s : {"scaling", "torch", "run", "train_loop_config"})
    EXPECT_TRUE(j["config"].contains(s)) << s;
  EXPECT_EQ(j["config"]["scaling"]["num_workers"], 2);
  EXPECT_EQ(j["config"]["run"]["name"], "tpu_training");
  EXPECT_EQ(j["config"]["train_loop_config"]["lr"], 0.1);

  ASSERT_TRUE(j.at("workers").is_array());
  ASSERT_EQ(j["workers"].size(), 2u);
  const json& w = j["workers"][1];
  for (const char* s : {"rank", "local_rank", "node_rank", "pid"})
    EXPECT_TRUE(w.at(s).is_number_integer()) << s;
  for (const char* s : {"node_id", "node_ip", "hostname", "device"})
    EXPECT_TRUE(w.at(s).is_string()) << s;
  EXPECT_EQ(w.size(), 8u);
  EXPECT_EQ(w["rank"], 1);
  EXPECT_EQ(w["node_rank"], 1);
  EXPECT_EQ(w["node_ip"], "10.0.0.2");
  EXPECT_EQ(w["pid"], 5678);

  ASSERT_TRUE(j.at("checkpoints").is_array());
  ASSERT_EQ(j["checkpoints"].size(), 1u);
  const json& c = j["checkpoints"][0];
  EXPECT_EQ(c.size(), 3u);
  EXPECT_TRUE(c.at("iteration").is_number_integer());
  EXPECT_EQ(c["iteration"], 5);  // report index 4 is iteration 5
  EXPECT_TRUE(c.at("path").is_string());
  ASSERT_TRUE(c.at("metrics").is_object());
  EXPECT_EQ(c["metrics"]["loss"], 0.5);

  ASSERT_TRUE(j.at("latest_metrics").is_object());
  EXPECT_TRUE(j["latest_metrics"]["loss"].is_number());
  EXPECT_EQ(j["latest_metrics"]["step"], 12.0);
}

TEST(RunRecord, EmptyListsAreArraysAndEmptyMetricsAnObject) {
  RunRecord r;
  json j = json::parse(r.ToJson());
  EXPECT_TRUE(j.at("workers").is_array());
  EXPECT_TRUE(j.at("checkpoints").is_array());
  EXPECT_TRUE(j.at("latest_metrics").is_object()) << j.at("latest_metrics").dump();
}

TEST(RunRecord, NonFiniteMetricsAreNull) {
  RunRecord r = SampleRecord();
  r.latest_metrics = {{"loss", std::numeric_limits<double>::quiet_NaN()},
                      {"grad", std::numeric_limits<double>::infinity()},
                      {"ok", 1.0}};
  json j = json::parse(r.ToJson());  // must stay valid JSON
  EXPECT_TRUE(j["latest_metrics"]["loss"].is_null());
  EXPECT_TRUE(j["latest_metrics"]["grad"].is_null());
  EXPECT_EQ(j["latest_metrics"]["ok"], 1.0);
}

TEST(MetricsEntry, EveryValueIsAString) {
  json e =
      MetricsEntry(3, {{"loss", 0.25}, {"step", 3}}, 1700000001.5, "/runs/r/checkpoint_000003");
  std::set<std::string> keys;
  for (const auto& [k, v] : e.items()) {
    keys.insert(k);
    EXPECT_TRUE(v.is_string()) << k << " is " << v.type_name();
  }
  EXPECT_EQ(keys, (std::set<std::string>{"iteration", "time", "metrics", "checkpoint"}));
  EXPECT_EQ(e["iteration"], "3");
  EXPECT_DOUBLE_EQ(std::stod(e["time"].get<std::string>()), 1700000001.5);
  EXPECT_EQ(e["checkpoint"], "/runs/r/checkpoint_000003");
  json metrics = json::parse(e["metrics"].get<std::string>());
  EXPECT_EQ(metrics, (json{{"loss", 0.25}, {"step", 3.0}}));
}

TEST(MetricsEntry, NoCheckpointAndNonFiniteMetrics) {
  json e = MetricsEntry(1, {{"loss", std::numeric_limits<double>::quiet_NaN()}}, 1.0, "");
  EXPECT_EQ(e["checkpoint"], "");
  json metrics = json::parse(e["metrics"].get<std::string>());
  EXPECT_TRUE(metrics["loss"].is_null());
  EXPECT_TRUE(json::parse(MetricsEntry(2, {}, 1.0, "")["metrics"].get<std::string>()).is_object());
}

}  // namespace
}  // namespace orrery::train
