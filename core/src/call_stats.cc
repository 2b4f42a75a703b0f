#include "core/internal/call_stats.h"

#include <algorithm>
#include <cmath>

namespace orrery {

std::vector<double> CallLatencyBounds() {
  return metrics::ExponentialBounds(0.001, 2, proto::kCallLatencyBuckets - 1);
}

CallCounter::CallCounter() : latency_(CallLatencyBounds()) {}

void CallCounter::Started() {
  MutexLock lock(&mu_);
  ++started_;
  ++version_;
}

void CallCounter::Ended(bool ok, double seconds) {
  MutexLock lock(&mu_);
  ++(ok ? finished_ : failed_);
  latency_.Observe(std::max(0.0, seconds));
  ++version_;
}

bool CallCounter::TakeIfChanged(proto::WorkerStatsMsg* out) {
  {
    MutexLock lock(&mu_);
    if (version_ == reported_) return false;
    reported_ = version_;
  }
  Snapshot(out);
  return true;
}

void CallCounter::Snapshot(proto::WorkerStatsMsg* out) {
  MutexLock lock(&mu_);
  out->started = started_;
  out->finished = finished_;
  out->failed = failed_;
  out->latency_buckets = latency_.counts;
  out->latency_sum_s = latency_.sum;
}

bool NodeCallStats::Update(const proto::WorkerStatsMsg& m) {
  if (m.latency_buckets.size() != proto::kCallLatencyBuckets || !std::isfinite(m.latency_sum_s) ||
      m.latency_sum_s < 0)
    return false;
  live_[m.worker_id] = m;
  return true;
}

void NodeCallStats::Retire(const std::string& worker_id) {
  auto it = live_.find(worker_id);
  if (it == live_.end()) return;
  Add(retired_, it->second);
  live_.erase(it);
}

void NodeCallStats::Add(Totals& into, const proto::WorkerStatsMsg& m) {
  into.submitted += m.submitted;
  into.started += m.started;
  into.finished += m.finished;
  into.failed += m.failed;
  for (size_t i = 0; i < m.latency_buckets.size() && i < into.latency.counts.size(); ++i)
    into.latency.counts[i] += m.latency_buckets[i];
  into.latency.sum += m.latency_sum_s;
}

NodeCallStats::Totals NodeCallStats::Sum() const {
  Totals t = retired_;
  for (const auto& [id, m] : live_) Add(t, m);
  return t;
}

}  // namespace orrery
