#include "node/src/memory_monitor.h"

#include <cstdio>

#include "core/internal/log.h"

namespace orrery::node {

int ChooseOomVictim(const std::vector<OomCandidate>& candidates) {
  int best = -1;
  for (int i = 0; i < int(candidates.size()); ++i) {
    if (best < 0) {
      best = i;
      continue;
    }
    const OomCandidate& c = candidates[i];
    const OomCandidate& b = candidates[best];
    if (c.retriable != b.retriable) {
      if (c.retriable) best = i;
    } else if (c.started >= b.started) {
      best = i;
    }
  }
  return best;
}

std::string FormatBytes(int64_t bytes) {
  char buf[64];
  if (bytes >= (int64_t(1) << 30)) {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", double(bytes) / double(int64_t(1) << 30));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", double(bytes) / double(1 << 20));
  }
  return buf;
}

std::string OutOfMemoryMessage(const std::string& node_id_hex, const MemoryUsage& usage,
                               double threshold, const std::string& victim) {
  char numbers[96];
  std::snprintf(numbers, sizeof(numbers), " (%.1f%%, %s) is above the threshold %g",
                usage.Fraction() * 100, usage.source.c_str(), threshold);
  return "the memory monitor of node " + node_id_hex + " killed " + victim + ": memory in use " +
         FormatBytes(usage.used_bytes) + " of " + FormatBytes(usage.total_bytes) + numbers +
         " (memory_usage_threshold)";
}

MemoryMonitor::MemoryMonitor(std::unique_ptr<MemoryReader> reader, double threshold)
    : reader_(std::move(reader)), threshold_(threshold) {}

bool MemoryMonitor::Above(const MemoryUsage& u) const {
  return u.total_bytes > 0 && double(u.used_bytes) > threshold_ * double(u.total_bytes);
}

bool MemoryMonitor::Refresh() {
  auto r = reader_->Read();
  if (!r.ok()) {
    if (!warned_)
      LOG_WARN("memory monitor: " + r.status().message() +
               "; no worker is killed for memory until it can read");
    warned_ = true;
    last_ = MemoryUsage{};
    return false;
  }
  warned_ = false;
  last_ = std::move(r).value();
  return Above(last_);
}

}  // namespace orrery::node
