// Call counts for the metrics (docs/metrics.md). A worker counts the calls it runs
// (CallCounter, any thread) and reports them to its node about once a second
// (kWorkerStats); the node keeps each worker's latest report and sums them (NodeCallStats,
// its inbox thread), a dead worker's last report included.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/internal/metrics.h"
#include "core/internal/protocol.h"
#include "core/internal/thread_annotations.h"

namespace orrery {

// The latency buckets' upper bounds: 1 ms * 2^i for the first kCallLatencyBuckets - 1, then
// +Inf.
std::vector<double> CallLatencyBounds();

class CallCounter {
 public:
  CallCounter();
  void Started() EXCLUDES(mu_);
  // A call that began ended: returned a value (ok) or threw or was cancelled, after `seconds`.
  void Ended(bool ok, double seconds) EXCLUDES(mu_);
  // The counts so far, when they changed since the last call that returned true.
  bool TakeIfChanged(proto::WorkerStatsMsg* out) EXCLUDES(mu_);
  // The counts so far, changed or not.
  void Snapshot(proto::WorkerStatsMsg* out) EXCLUDES(mu_);

 private:
  Mutex mu_;
  uint64_t started_ GUARDED_BY(mu_) = 0, finished_ GUARDED_BY(mu_) = 0, failed_ GUARDED_BY(mu_) = 0;
  metrics::Histogram latency_ GUARDED_BY(mu_);
  uint64_t version_ GUARDED_BY(mu_) = 0, reported_ GUARDED_BY(mu_) = 0;
};

// Counts one call: begun when made, ended (finished, or failed unless ok is set) when it goes.
struct CountedCall {
  CallCounter& counter;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  bool ok = false;
  explicit CountedCall(CallCounter& c) : counter(c) { counter.Started(); }
  ~CountedCall() {
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    counter.Ended(ok, took.count());
  }
  CountedCall(const CountedCall&) = delete;
  CountedCall& operator=(const CountedCall&) = delete;
};

class NodeCallStats {
 public:
  struct Totals {
    uint64_t submitted = 0, started = 0, finished = 0, failed = 0;
    metrics::Histogram latency{CallLatencyBounds()};
  };
  // A worker's report (cumulative counts): replaces its previous one. A report whose
  // buckets are not kCallLatencyBuckets long, or whose sum is not a finite non-negative
  // number, is refused (false).
  bool Update(const proto::WorkerStatsMsg& m);
  // The worker is gone: its last report moves into the totals of retired workers.
  void Retire(const std::string& worker_id);
  Totals Sum() const;

 private:
  static void Add(Totals& into, const proto::WorkerStatsMsg& m);
  std::map<std::string, proto::WorkerStatsMsg> live_;  // by worker id
  Totals retired_;
};

}  // namespace orrery
