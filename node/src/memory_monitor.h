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

#include "orrery/status.h"

namespace orrery::node {

// Memory in use against the limit that applies to this node's processes.
struct MemoryUsage {
  int64_t used_bytes = 0;
  int64_t total_bytes = 0;  // 0: unknown (nothing could be read)
  std::string source;       // "host" (/proc/meminfo), "cgroup v2" or "cgroup v1"
  double Fraction() const { return total_bytes > 0 ? double(used_bytes) / double(total_bytes) : 0; }
};

class MemoryReader {
 public:
  virtual ~MemoryReader() = default;
  // The current usage; an error when nothing usable could be read.
  virtual Result<MemoryUsage> Read() = 0;
};

// Reads <sysroot>/proc/meminfo and the memory limits of this process's cgroup and of its
// ancestors (found through <sysroot>/proc/self/cgroup): memory.max, memory.current and
// memory.stat under <sysroot>/sys/fs/cgroup (v2), else memory.limit_in_bytes,
// memory.usage_in_bytes and memory.stat under <sysroot>/sys/fs/cgroup/memory (v1). "" or
// "/" is the real host. Of the host and every limit found, the one closest to running out
// (the largest fraction in use) is reported.
class SystemMemoryReader : public MemoryReader {
 public:
  explicit SystemMemoryReader(std::string sysroot) : sysroot_(std::move(sysroot)) {}
  Result<MemoryUsage> Read() override;

 private:
  std::string sysroot_;
};

// Parsers of the files above. Their text is untrusted: sizes are bounded, numbers checked.
// /proc/meminfo: used = MemTotal - MemAvailable (or - MemFree - Buffers - Cached on kernels
// without MemAvailable).
Result<MemoryUsage> ParseMeminfo(std::string_view text);
// A cgroup's limit and usage; page cache that the kernel reclaims first (`inactive_file`, or
// `total_inactive_file` in v1's memory.stat) does not count as used. NotFound when the
// cgroup has no limit ("max", or v1's huge "unlimited" value).
Result<MemoryUsage> ParseCgroup(std::string_view limit, std::string_view usage,
                                std::string_view stat, const std::string& source);
// The cgroup paths, relative to the controller's mount, of this process's cgroup and its
// ancestors, innermost first, always ending with "" (the mount itself), from the text of
// /proc/self/cgroup: the v2 line "0::/path" when `v2`, else the v1 line naming the memory
// controller. A path that is missing, too long, too deep or has ".." gives {""}.
std::vector<std::string> CgroupAncestors(std::string_view proc_self_cgroup, bool v2);
// The binding one of two readings: the larger fraction in use.
MemoryUsage Tighter(const MemoryUsage& a, const MemoryUsage& b);

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
