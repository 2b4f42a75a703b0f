// Runs an actor's calls on a pool of OS threads, at most `concurrency` of them at once.
//
// A call holds one of `concurrency` slots while it runs. A call waiting in orrery::Get/Wait
// gives its slot up, so another call may start (with concurrency 1, a method waiting on
// another call to the same actor never deadlocks the actor); if work is queued while no
// thread is idle, the executor adds a thread (compensation, as in fork/join pools). When
// the wait ends, the call takes a slot again before it goes on: it waits for one if all
// are taken, ahead of calls that have not started yet. So at most `concurrency` calls
// ever run at once, and calls interleave only at Get/Wait points (the reentrancy of Ray's
// async actors and Orleans' interleaving grains), never in parallel beyond the limit.
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

  explicit Executor(int concurrency, int max_threads = 256);
  ~Executor();
  // Thread-safe; calls start in submission order.
  void Submit(Work work) EXCLUDES(mu_);
  // Stops taking work and joins the threads once running calls end.
  void Stop() EXCLUDES(mu_);

  // Called around blocking waits on an executor thread (no-ops elsewhere): BeforeBlock
  // gives the call's slot up, AfterBlock blocks until the call has one again.
  static void BeforeBlock();
  static void AfterBlock();

  // For tests: calls whose wait ended and that wait for a slot.
  int resuming() EXCLUDES(mu_);

 private:
  void ThreadMain() EXCLUDES(mu_);
  void SpawnLocked() REQUIRES(mu_);
  void OnBlock() EXCLUDES(mu_);
  void OnUnblock() EXCLUDES(mu_);
  // Whether a queued call may start now: a slot is free and no resumed call waits for one.
  bool CanStartLocked() const REQUIRES(mu_);
  // Wakes whoever gets the slot just given up: a resumed call first, else a queued one.
  void SlotFreedLocked() REQUIRES(mu_);
  // When a queued call may start: wakes an idle thread, or adds one if none is idle (the
  // others may all be blocked in waits).
  void WakeOrSpawnLocked() REQUIRES(mu_);

  const int concurrency_;
  const int max_threads_;
  Mutex mu_;
  CondVar cv_;         // idle threads: a queued call may start
  CondVar resume_cv_;  // resumed calls: a slot may be free
  std::deque<Work> queue_ GUARDED_BY(mu_);
  int active_ GUARDED_BY(mu_) = 0;    // calls holding a slot
  int resuming_ GUARDED_BY(mu_) = 0;  // calls back from a wait, waiting for a slot
  int idle_ GUARDED_BY(mu_) = 0;      // threads waiting for work
  bool closed_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
};

// The one slot of a call path that runs calls inline (a max_concurrency 1 actor's calls on
// its call inbox thread), with the same rules as Executor: a new call starts only when the
// slot is free and no resumed call waits; a resumed call waits for the slot first.
// Thread-safe.
class CallSlot {
 public:
  // For a call that has not started: takes the slot if it may start now.
  bool TryTake() EXCLUDES(mu_);
  // For a call back from a wait: blocks until it has the slot.
  void TakeResumed() EXCLUDES(mu_);
  // Gives the slot up (the call ended or waits).
  void Release() EXCLUDES(mu_);
  int resuming() EXCLUDES(mu_);

 private:
  Mutex mu_;
  CondVar cv_;
  bool held_ GUARDED_BY(mu_) = false;
  int resuming_ GUARDED_BY(mu_) = 0;
};

}  // namespace orrery::runtime
