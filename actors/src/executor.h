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

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace orrery::runtime {

class Executor {
 public:
  using Work = std::function<void()>;

  explicit Executor(int concurrency, int max_threads = 256);
  ~Executor();
  // Thread-safe; calls start in submission order.
  void Submit(Work work);
  // Stops taking work and joins the threads once running calls end.
  void Stop();

  // Called around blocking waits on an executor thread (no-ops elsewhere): BeforeBlock
  // gives the call's slot up, AfterBlock blocks until the call has one again.
  static void BeforeBlock();
  static void AfterBlock();

  // For tests: calls whose wait ended and that wait for a slot.
  int resuming();

 private:
  void ThreadMain();
  void SpawnLocked();
  void OnBlock();
  void OnUnblock();
  // Whether a queued call may start now: a slot is free and no resumed call waits for one.
  bool CanStartLocked() const;
  // Wakes whoever gets the slot just given up: a resumed call first, else a queued one.
  void SlotFreedLocked();
  // When a queued call may start: wakes an idle thread, or adds one if none is idle (the
  // others may all be blocked in waits).
  void WakeOrSpawnLocked();

  const int concurrency_;
  const int max_threads_;
  std::mutex mu_;
  std::condition_variable cv_;         // idle threads: a queued call may start
  std::condition_variable resume_cv_;  // resumed calls: a slot may be free
  std::deque<Work> queue_;
  int active_ = 0;    // calls holding a slot
  int resuming_ = 0;  // calls back from a wait, waiting for a slot
  int idle_ = 0;      // threads waiting for work
  bool closed_ = false;
  std::vector<std::thread> threads_;
};

// The one slot of a call path that runs calls inline (a max_concurrency 1 actor's calls on
// its call inbox thread), with the same rules as Executor: a new call starts only when the
// slot is free and no resumed call waits; a resumed call waits for the slot first.
// Thread-safe.
class CallSlot {
 public:
  // For a call that has not started: takes the slot if it may start now.
  bool TryTake();
  // For a call back from a wait: blocks until it has the slot.
  void TakeResumed();
  // Gives the slot up (the call ended or waits).
  void Release();
  int resuming();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  int resuming_ = 0;
};

}  // namespace orrery::runtime
