// Train configuration (docs/train.md "Configs"). Aggregates whose
// fields have defaults, so both `ScalingConfig s; s.use_tpu = true;` and designated
// initializers work:
//   ScalingConfig{.num_workers = 2, .use_tpu = true, .resources_per_worker = {{"TPU", 4}},
//                 .topology = "2x2x2", .accelerator_type = "TPU-V4", .placement_strategy =
//                 "SPREAD"}
#pragma once

#include <map>
#include <string>
#include <vector>

#include "orrery/config.h"

namespace orrery::train {

struct ScalingConfig {
  int num_workers = 1;  // with use_tpu: TPU hosts (one SPMD process per host)
  bool use_gpu = false;
  bool use_tpu = false;
  Resources resources_per_worker;  // default: {"CPU": 1}; {"GPU": 1}; {"TPU": chips per host}
  std::string topology;            // "2x2x2" / "4x4"
  std::string accelerator_type;    // "TPU-V4", "TPU-V6E", ... (or a GPU model as a label)
  std::string placement_strategy = "PACK";  // PACK, SPREAD, STRICT_PACK, STRICT_SPREAD
  Labels label_selector;
};

struct XlaSpmdConfig {
  std::vector<int> mesh_shape;  // empty: derived from the topology
  int data_parallel_size = 0;   // 0: derived
  int model_parallel_size = 0;  // 0: derived
  std::string partitioning_mode = "auto";
};

struct TorchConfig {
  std::string backend;  // "gloo" | "nccl" | "xla_tpu"; empty: chosen from the scaling config
  XlaSpmdConfig xla_spmd_config;
  double timeout_s = 1800;  // collective / rendezvous timeout
};

struct FailureConfig {
  int max_failures = 0;  // group restarts allowed; -1: unlimited
};

struct CheckpointConfig {
  int num_to_keep = 0;          // 0: keep all
  std::string score_attribute;  // metric that ranks checkpoints; empty: the latest wins
  std::string order = "max";    // "max" or "min"
};

struct RunConfig {
  std::string name;
  std::string storage_path;
  FailureConfig failure_config;
  CheckpointConfig checkpoint_config;
  // How long Fit() waits to reserve its workers; < 0: TRAIN_PLACEMENT_GROUP_TIMEOUT_S or 100 s.
  double reservation_timeout_s = -1;
  // 1: Fit() prints a line per report (step, metrics, throughput) and per restart; 0: quiet.
  int verbose = 1;
};

// The configuration Fit() runs with, after validation and defaults.
struct ResolvedConfig {
  std::string backend;  // gloo, nccl or xla_tpu
  std::string device;   // per worker: "cpu", "cuda", "xla"
  Resources resources_per_worker;
  int num_workers = 0;
  // TPU only.
  std::string pod_type;  // "v4-16"
  int hosts_per_slice = 0;
  int chips_per_host = 0;
  int num_slices = 0;
  std::vector<int> mesh_shape;
  int data_parallel_size = 0;
  int model_parallel_size = 0;
  std::vector<std::string> warnings;  // e.g. a 2-D topology read as AxBx1
};

// Checks every rule of docs/train.md "Configs" (and the basic ones: worker count,
// backend names, strategy names) and derives the defaults. Throws orrery::ConfigError with a
// message that says what to change; nothing is reserved before this passes.
ResolvedConfig ResolveConfig(const ScalingConfig& scaling, const TorchConfig& torch);

}  // namespace orrery::train
