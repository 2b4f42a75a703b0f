// A training run as the state store keeps it (docs/redis-schema.md "train_runs"):
// the record in `train_runs` and the entries of its metrics stream. The dashboard reads
// these, so their fields are documented and checked by a test.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/internal/error_kind.h"
#include "orrery/train/config.h"
#include "orrery/train/context.h"
#include "train/src/checkpoint_manager.h"

namespace orrery::train {

struct RunWorkerRecord {
  int rank = 0;
  int local_rank = 0;
  int node_rank = 0;
  std::string node_id;
  std::string node_ip;
  std::string hostname;
  int pid = 0;
  std::string device;
};

struct RunRecord {
  std::string id;  // 32 hex digits
  std::string name;
  std::string status;  // PENDING, RUNNING, RESTARTING, FINISHED, ERRORED
  std::string loop;    // the registered loop function
  std::string path;    // <storage_path>/<name>
  std::string backend;
  double start_time = 0, end_time = 0;  // seconds since the epoch; end 0 while running
  int num_failures = 0;
  int64_t iterations = 0;                // complete reports
  nlohmann::json config;                 // scaling, torch, run, train_loop_config
  std::vector<RunWorkerRecord> workers;  // the current (or last) group, by rank
  std::vector<KeptCheckpoint> checkpoints;
  Metrics latest_metrics;
  proto::ErrorKind error_kind = proto::ErrorKind::kNone;  // stored by its name ("" for none)
  std::string error;

  std::string ToJson() const;
};

// The configs as JSON, for the record.
nlohmann::json ConfigJson(const ScalingConfig& scaling, const TorchConfig& torch,
                          const RunConfig& run, const nlohmann::json& loop_config);

// One entry of the metrics stream (every value a string, as Redis streams store them).
nlohmann::json MetricsEntry(int64_t iteration, const Metrics& metrics, double time,
                            const std::string& checkpoint);

}  // namespace orrery::train
