// Records drivers ask the head to keep in the state store: the training module's run
// records ("train_runs") and their metrics streams. Each stream entry is appended once, and a
// request is acknowledged only once the store has it. docs/architecture.md "The head".
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "scheduler/src/head_context.h"

namespace orrery::scheduler {

class DriverRecords {
 public:
  explicit DriverRecords(HeadContext ctx) : ctx_(std::move(ctx)) {}
  void OnPutRecord(const proto::RecordMsg& m);
  // Forgets a run whose record expired (docs/redis-schema.md "Retention").
  void Forget(const std::string& key) { stream_written_.erase(key); }

  // The latest numeric value of each metric a training run reported (its record's
  // `latest_metrics`), for the head's metrics (docs/metrics.md).
  // Bounded: kMaxRuns runs (the oldest by first report give way), kMaxMetricsPerRun names
  // of at most kMaxMetricNameBytes each per run; a value that is not a finite number is
  // not kept.
  struct RunMetrics {
    std::string name;  // RunConfig::name, from the record ("" until one says)
    std::map<std::string, double> latest;
    uint64_t order = 0;
  };
  static constexpr size_t kMaxRuns = 256, kMaxMetricsPerRun = 64, kMaxMetricNameBytes = 128;
  const std::map<std::string, RunMetrics>& run_metrics() const { return runs_; }

 private:
  void Remember(const std::string& key, const nlohmann::json& record);

  HeadContext ctx_;
  std::map<std::string, int64_t> stream_written_;
  std::map<std::string, RunMetrics> runs_;  // by record key (the run's id)
  uint64_t next_order_ = 0;                 // record key -> last stream index appended
};

}  // namespace orrery::scheduler
