// The node's memory monitor: reads how much of the host's memory (or of its cgroup's limit)
// is in use and, above `memory_usage_threshold`, names the worker to kill so that the
// kernel's OOM killer never has to pick (and maybe take a daemon). Ray's policy: the newest
// worker whose work can be retried (a task with retries left, an actor with restarts left),
// else the newest worker (docs/design-decisions.md, "The memory monitor").
//
// Reading goes through MemoryReader so that tests use a fake tree (ORRERY_SYSROOT) or a
// fake reader; the victim choice is a pure function. Not thread-safe: the node uses one
// monitor from its inbox thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/internal/memory_usage.h"
#include "orrery/status.h"

namespace orrery::node {

using internal::CgroupAncestors;
using internal::MemoryReader;
using internal::MemoryUsage;
using internal::ParseCgroup;
using internal::ParseMeminfo;
using internal::SystemMemoryReader;
using internal::Tighter;

// A worker the monitor may kill.
struct OomCandidate {
  std::string worker_id;
  bool retriable = false;  // its task would be retried, or its actor restarted
  double started = 0;      // when it took its current work (larger: newer)
};

// Index of the worker to kill: the newest retriable one, else the newest; -1 when none.
int ChooseOomVictim(const std::vector<OomCandidate>& candidates);

// "15.84 GiB"
std::string FormatBytes(int64_t bytes);

// The text the caller's OutOfMemoryError carries: the node, the memory in use, the
// threshold, and what was killed (`victim`, e.g. "the worker (pid 12) of actor 3fa1...").
std::string OutOfMemoryMessage(const std::string& node_id_hex, const MemoryUsage& usage,
                               double threshold, const std::string& victim);

class MemoryMonitor {
 public:
  MemoryMonitor(std::unique_ptr<MemoryReader> reader, double threshold);
  // Reads memory now and keeps the reading. Returns whether usage is above the threshold;
  // a failed read is logged (once until reads work again) and is never above.
  bool Refresh();
  const MemoryUsage& last() const { return last_; }
  double threshold() const { return threshold_; }
  bool Above(const MemoryUsage& u) const;

 private:
  std::unique_ptr<MemoryReader> reader_;
  double threshold_;
  MemoryUsage last_;
  bool warned_ = false;
};

}  // namespace orrery::node
