// Runs an actor's (or a task worker's) calls: `concurrency` OS threads, each running
// boost.fiber fibers, one fiber per call. A thread starts a new call only when its current
// one has finished or is waiting in orrery::Get/Wait (which frees the thread's slot), so:
//  - with concurrency 1 calls run one at a time in arrival order, yet a method waiting on
//    another call's result never deadlocks the actor;
//  - with concurrency n, n calls run at once, and a method that blocks its thread (a plain
//    sleep or lock) holds up only that thread.
#pragma once

#include <boost/fiber/condition_variable.hpp>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace orrery::runtime {

class Executor {
 public:
  using Work = std::function<void()>;

  explicit Executor(int concurrency);
  ~Executor();
  // Thread-safe; works run in submission order of start.
  void Submit(Work work);
  // Stops taking work and joins the threads once running calls end.
  void Stop();

 private:
  void ThreadMain();
  bool Pop(Work* out);

  std::mutex mu_;
  boost::fibers::condition_variable_any cv_;
  std::deque<Work> queue_;
  bool closed_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace orrery::runtime
