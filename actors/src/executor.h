// Runs an actor's calls on up to `concurrency` OS threads, started as calls need them: at most
// that many calls at once, started in submission order. (An async actor whose calls all run
// on its call loop, docs/api.md "Async actors", never starts one.)
//
// A call holds its thread, and so its slot, until it returns, also while it waits in
// orrery::Get or Wait: calls of an actor never interleave at a wait (as Ray's synchronous
// and threaded actors, and Orleans' non-reentrant grains; docs/api.md). A method that would
// wait on a call queued behind it on a default actor fails instead (Runtime::Get).
// Waits use std::condition_variable: Boost.Fiber's spinlocks were measured spending 39% of
// the CPU on a 2-core machine with multi-millisecond stalls (docs/design-decisions.md).
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "core/internal/thread_annotations.h"

namespace orrery::runtime {

class Executor {
 public:
  using Work = std::function<void()>;

  explicit Executor(int concurrency);
  ~Executor();
  // Thread-safe; calls start in submission order.
  void Submit(Work work) EXCLUDES(mu_);
  // Stops taking work and joins the threads once the queued and running calls end.
  void Stop() EXCLUDES(mu_);

 private:
  void ThreadMain() EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;  // idle threads: work was queued, or the executor closed
  std::deque<Work> queue_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
  const int concurrency_;
  size_t idle_ GUARDED_BY(mu_) = 0;  // threads waiting for work
};

// The one slot of a call path that runs calls inline (a max_concurrency 1 actor's calls on
// its call inbox thread): a call starts only when the slot is free and holds it until it
// returns. Thread-safe.
class CallSlot {
 public:
  // Takes the slot if it is free.
  bool TryTake() EXCLUDES(mu_);
  void Release() EXCLUDES(mu_);

 private:
  Mutex mu_;
  bool held_ GUARDED_BY(mu_) = false;
};

}  // namespace orrery::runtime
