// TorchTrainer: runs a training loop on a gang-scheduled group of SPMD workers
// (docs/train.md "What Fit() does").
#pragma once

#include <exception>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "orrery/errors.h"
#include "orrery/train/config.h"
#include "orrery/train/context.h"

namespace orrery::train {

// A training loop: a free function registered with ORRERY_REMOTE (every worker process runs
// the driver's executable and finds the loop by its registered name).
using TrainLoop = void (*)(Context&);

// A framework process as the training loop (docs/train.md "Framework processes"): each
// worker of the group starts `argv` (found on PATH when it has no '/') as a child, with
// torchrun's variables, the XLA and JAX ones on a TPU slice, `env` and the Python module
// orrery_train on PYTHONPATH, in `working_dir` ("" -> the worker's). The process reports
// through orrery_train (or the line protocol); its exit 0 ends the rank's loop.
struct Entrypoint {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::string working_dir;
};

struct Result {
  Metrics metrics;                       // the last report (rank 0's)
  std::vector<Metrics> metrics_history;  // every report, in order
  std::optional<Checkpoint> checkpoint;  // the latest checkpoint kept
  // The checkpoints kept (num_to_keep best by score_attribute, plus the latest), each with
  // the metrics reported with it, best first.
  std::vector<std::pair<Checkpoint, Metrics>> best_checkpoints;
  std::string path;      // <storage_path>/<run name>
  std::string run_id;    // the key of the run's record in the state store
  int num_failures = 0;  // group restarts after a worker or node failure
  // Empty when the run succeeded. Otherwise what failed: TrainingFailedError (a worker or
  // node died more often than max_failures allows, or the loop threw: the message names the
  // rank, node and cause), PlacementGroupError (the workers could not be reserved in time),
  // AcceleratorNotAvailableError (no node of the cluster offers what was asked for).
  std::shared_ptr<Error> error;

  // Throws the error (with its own type) when there is one.
  void ThrowIfError() const {
    if (error_ptr_) std::rethrow_exception(error_ptr_);
  }
  // For the trainer: records an error both as `error` and for ThrowIfError().
  template <typename E>
  void SetError(const E& e) {
    error = std::make_shared<E>(e);
    error_ptr_ = std::make_exception_ptr(e);
  }

 private:
  std::exception_ptr error_ptr_;
};

class TorchTrainer {
 public:
  // Throws FunctionNotFoundError when `loop` was not registered with ORRERY_REMOTE.
  TorchTrainer(TrainLoop loop, ScalingConfig scaling, RunConfig run = {}, TorchConfig torch = {},
               nlohmann::json train_loop_config = {});
  // The same with a framework process in place of the loop; Fit() throws ConfigError when
  // its argv is empty. A process that exits non-zero, is killed or is silent (no report
  // and no heartbeat) for TorchConfig::timeout_s fails the attempt, naming the rank, host,
  // status and the last lines of its stderr; the group restarts within max_failures.
  TorchTrainer(Entrypoint entrypoint, ScalingConfig scaling, RunConfig run = {},
               TorchConfig torch = {}, nlohmann::json train_loop_config = {});

  // Validates the configs (throws ConfigError before anything is reserved), reserves the
  // workers, runs the loop on all of them, restarts the group from the latest checkpoint
  // after a failure (up to max_failures), and always releases the workers and their
  // reservation. Needs orrery::Init(). Failures of the run itself are returned in
  // Result::error (call ThrowIfError() to have them thrown).
  Result Fit();

 private:
  std::string loop_name_;
  Entrypoint entrypoint_;  // used when loop_name_ is ""
  ScalingConfig scaling_;
  RunConfig run_;
  TorchConfig torch_;
  nlohmann::json loop_config_;
};

}  // namespace orrery::train
