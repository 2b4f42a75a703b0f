// A worker's call-stats report (kWorkerStats) for tests of what the node sums and renders:
// `finished` + `failed` calls, all in the first latency bucket, 0.5 ms each.
#pragma once

#include <cstdint>
#include <string>

#include "core/internal/protocol.h"

namespace orrery::testing {

inline proto::WorkerStatsMsg StatsReport(const std::string& worker, uint64_t finished,
                                         uint64_t failed) {
  proto::WorkerStatsMsg m;
  m.worker_id = worker;
  m.started = finished + failed;
  m.finished = finished;
  m.failed = failed;
  m.latency_buckets.assign(proto::kCallLatencyBuckets, 0);
  m.latency_buckets[0] = finished + failed;
  m.latency_sum_s = 0.0005 * double(finished + failed);
  return m;
}

}  // namespace orrery::testing
