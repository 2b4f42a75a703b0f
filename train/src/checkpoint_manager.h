// Which checkpoints a run keeps (CheckpointConfig): the num_to_keep best by
// score_attribute (or the newest when there is none), and always the latest one, which a
// restart resumes from. Pure bookkeeping: the trainer deletes what Register() evicts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "orrery/train/config.h"
#include "orrery/train/context.h"

namespace orrery::train {

struct KeptCheckpoint {
  int64_t index = 0;  // the report that carried it
  std::string path;
  Metrics metrics;
};

// The directory name of the checkpoint reported with report `index` (0-based over the
// run): checkpoint_<iteration>, the iteration being index + 1, six digits.
std::string CheckpointDirName(int64_t index);

class CheckpointManager {
 public:
  explicit CheckpointManager(CheckpointConfig config) : config_(std::move(config)) {}

  // Adds a checkpoint; returns the paths of the checkpoints no longer kept.
  std::vector<std::string> Register(KeptCheckpoint checkpoint);
  // The newest checkpoint, if any.
  std::optional<KeptCheckpoint> Latest() const;
  // The kept checkpoints, best first (newest first without a score attribute).
  std::vector<KeptCheckpoint> Kept() const;

 private:
  // True when a ranks above b.
  bool Better(const KeptCheckpoint& a, const KeptCheckpoint& b) const;

  CheckpointConfig config_;
  std::vector<KeptCheckpoint> kept_;
};

}  // namespace orrery::train
