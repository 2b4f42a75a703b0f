// The reports of a running training group, as the driver collects them (docs/train.md
// "What Fit() does"): one Poll kept open per worker whose loop has not ended. A report is
// complete when every worker sent it (or ended); rank 0's report stands for it. Used by one
// thread (Fit's).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "orrery/orrery.h"
#include "train/src/worker.h"

namespace orrery::train {

class ReportCollector {
 public:
  // Why collecting stopped early: the worker of `rank` died or its Entrypoint's process
  // failed (`died`: the group may restart), or its loop failed.
  struct Failure {
    size_t rank = 0;
    bool died = false;
    std::string message;  // died: the ActorDiedError's text; else "<type>: <message>"
  };

  // `workers` by rank; reports before `first_index` were completed by earlier attempts.
  ReportCollector(std::vector<ActorHandle<internal::TrainWorker>> workers, int64_t first_index);

  // Opens a Poll on every worker that has none and is not done, waits until one answers
  // (at most 2 x poll_ms + 1 s) and takes in what the answers carry.
  std::optional<Failure> PollOnce(int poll_ms);
  // The next complete report in index order, with its checkpoint path ("" when none);
  // empty when the next one is not complete yet.
  std::optional<std::pair<ReportMsg, std::string>> TakeComplete();
  // After `failed` failed: waits up to timeout_ms for the other workers' answers to catch
  // up with what it had reported, and returns the reports every rank made (the failed one
  // included) that were not taken yet, in index order: progress the failure does not undo
  // (their checkpoints are where the group restarts from).
  std::vector<std::pair<ReportMsg, std::string>> SettleAfterFailure(size_t failed, int timeout_ms);
  bool AllDone() const;
  // Indices of reports some worker made that can no longer complete (after a failure).
  std::set<int64_t> Unfinished() const;
  // Indices with a checkpoint that rank 0 never reported (after every loop ended).
  std::set<int64_t> OrphanCheckpoints() const;

 private:
  // Rank 0's report next_final_ (it must be there) with its checkpoint path, and moves on.
  std::pair<ReportMsg, std::string> TakeNext();
  // Takes in one worker's answer; a failure when its loop failed.
  std::optional<Failure> Absorb(size_t rank, const PollReplyMsg& reply);

  std::vector<ActorHandle<internal::TrainWorker>> workers_;
  std::vector<int64_t> seen_;  // highest report index each worker sent
  std::vector<bool> done_;
  std::vector<ObjectRef<PollReplyMsg>> polls_;
  std::vector<bool> polling_;
  std::map<int64_t, ReportMsg> rank0_;
  std::map<int64_t, std::string> checkpoint_of_;
  int64_t next_final_;
};

}  // namespace orrery::train
