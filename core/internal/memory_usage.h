// How much of the host's memory (or of its cgroup's limit) is in use: read by the node's memory
// monitor (node/src/memory_monitor.h) and by every process that keeps freed memory
// (kept_memory.h), which gives it back when memory runs short.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "orrery/status.h"

namespace orrery::internal {

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

}  // namespace orrery::internal
