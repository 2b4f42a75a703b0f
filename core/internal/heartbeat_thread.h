// A thread that calls `beat` every period until stopped: a process's heartbeat, sent from a
// thread of its own so that a busy message loop (a storm of spawn requests, a handler that
// runs long) cannot hold it up (docs/architecture.md "Failure detection").
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

#include "core/internal/thread_annotations.h"

namespace orrery {

class HeartbeatThread {
 public:
  HeartbeatThread() = default;
  ~HeartbeatThread() { Stop(); }
  HeartbeatThread(const HeartbeatThread&) = delete;
  HeartbeatThread& operator=(const HeartbeatThread&) = delete;

  // Starts calling `beat` every period_s (the first call after one period). Once only.
  void Start(double period_s, std::function<void()> beat) {
    auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(period_s));
    thread_ = std::thread([this, period, beat = std::move(beat)] {
      auto next = std::chrono::steady_clock::now() + period;
      while (WaitUntil(next)) {
        beat();
        // Paced from the schedule, not from the end of the beat; a beat that ran late does not
        // make the next ones bunch up.
        next = std::max(next + period, std::chrono::steady_clock::now());
      }
    });
  }

  // Stops and joins the thread (idempotent; a beat under way finishes first).
  void Stop() EXCLUDES(mu_) {
    {
      MutexLock lock(&mu_);
      stop_ = true;
      cv_.NotifyAll();
    }
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }

 private:
  // Waits until `when`; false once stopped.
  bool WaitUntil(std::chrono::steady_clock::time_point when) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    while (!stop_ && cv_.WaitUntil(&mu_, when)) {
    }
    return !stop_;
  }

  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace orrery
