// The SPMD worker actor of a training group (one per worker, in its placement group
// bundle). The trainer calls Info() on every worker, then Start(), then Poll() until the
// loop ends. Registered with ORRERY_REMOTE in worker.cc, so every executable that links
// orrery_train can host it.
#pragma once

#include <cstdint>
#include <memory>

#include "train/src/worker_messages.h"

namespace orrery::train {
class CollectiveGroup;
}

namespace orrery::train::internal {

class ReportSink;

class TrainWorker {
 public:
  static TrainWorker* Create();
  ~TrainWorker();

  // Where this worker runs; binds its collective socket on the first call.
  WorkerInfoMsg Info();
  // Exports the backend's environment, connects the collective group and runs the loop on
  // a thread of its own. A second call (a resend) does nothing.
  bool Start(WorkerStartMsg m);
  // Reports with an index above `after`, waiting up to timeout_ms for one (or the end).
  PollReplyMsg Poll(int64_t after, int timeout_ms);

 private:
  struct State;
  TrainWorker();
  static void RunLoop(CollectiveGroup& group, ReportSink& sink, const WorkerStartMsg& m);
  // The trainer's Entrypoint as a child process (entrypoint_process.h) instead of a loop.
  static void RunProcess(CollectiveGroup& group, ReportSink& sink, const WorkerStartMsg& m);
  std::unique_ptr<State> s_;
};

}  // namespace orrery::train::internal
