// Runs an actor's (or a task worker's) calls on a pool of OS threads.
//
// At most `concurrency` calls are *running* at once; a call waiting in orrery::Get/Wait does
// not count, and if work is queued while no thread is idle, the executor adds a thread
// (compensation, as in fork/join pools). So:
//  - with concurrency 1 calls run one at a time in arrival order, yet a method waiting on
//    another call's result (even one to the same actor) never deadlocks the actor;
//  - with concurrency n, n calls run at once, and a method that blocks its thread (a plain
//    sleep or lock) holds up only that thread.
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

  // Called by blocking waits on an executor thread (no-ops elsewhere).
  static void BeforeBlock();
  static void AfterBlock();

 private:
  void ThreadMain();
  void SpawnLocked();
  void OnBlock();
  void OnUnblock();

  const int concurrency_;
  const int max_threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Work> queue_;
  int active_ = 0;  // running calls, not counting those blocked in a wait
  int idle_ = 0;    // threads waiting for work
  bool closed_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace orrery::runtime
