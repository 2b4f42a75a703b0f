// How much memory is in use against the limit that applies: the host's, or its cgroup's
// (docs/design-decisions.md "The memory monitor").
#include "core/internal/memory_usage.h"

#include <fstream>
#include <limits>

namespace orrery::internal {

namespace {

// The files read here are a few KiB; anything longer is not what the kernel writes.
constexpr size_t kMaxFileBytes = 64 << 10;
// cgroup v1 writes "no limit" as a value near 2^63; v2 writes "max". Any limit at or above
// 2^60 bytes (1 EiB) is taken as none.
constexpr int64_t kUnlimited = int64_t(1) << 60;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// A non-negative decimal integer that fits in int64_t.
bool ParseCount(std::string_view s, int64_t* out) {
  s = Trim(s);
  if (s.empty() || s.size() > 19) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    int d = c - '0';
    if (v > (std::numeric_limits<int64_t>::max() - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// Calls fn(key, rest) for each line "key<sep>rest" of `text`.
template <typename Fn>
void ForEachLine(std::string_view text, char sep, Fn fn) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    size_t at = line.find(sep);
    if (at == std::string_view::npos) continue;
    fn(Trim(line.substr(0, at)), Trim(line.substr(at + 1)));
  }
}

// "12345 kB" (or a bare number) in bytes.
bool ParseKilobytes(std::string_view s, int64_t* bytes) {
  std::string_view number = s;
  bool kb = false;
  if (size_t sp = s.find(' '); sp != std::string_view::npos) {
    number = s.substr(0, sp);
    std::string_view unit = Trim(s.substr(sp + 1));
    if (unit != "kB") return false;
    kb = true;
  }
  int64_t v = 0;
  if (!ParseCount(number, &v)) return false;
  if (kb && v > std::numeric_limits<int64_t>::max() / 1024) return false;
  *bytes = kb ? v * 1024 : v;
  return true;
}

// Up to kMaxFileBytes of a file; NotFound when it cannot be opened.
Result<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + path);
  std::string out(kMaxFileBytes + 1, '\0');
  in.read(out.data(), std::streamsize(out.size()));
  out.resize(size_t(in.gcount()));
  if (out.size() > kMaxFileBytes)
    return Status::InvalidArgument(path + " is longer than any the kernel writes");
  return out;
}

}  // namespace

Result<MemoryUsage> ParseMeminfo(std::string_view text) {
  if (text.size() > kMaxFileBytes) return Status::InvalidArgument("meminfo is too long");
  int64_t total = -1, available = -1, free = -1, buffers = -1, cached = -1;
  bool bad = false;
  ForEachLine(text, ':', [&](std::string_view key, std::string_view value) {
    int64_t* slot = key == "MemTotal"       ? &total
                    : key == "MemAvailable" ? &available
                    : key == "MemFree"      ? &free
                    : key == "Buffers"      ? &buffers
                    : key == "Cached"       ? &cached
                                            : nullptr;
    if (slot && !ParseKilobytes(value, slot)) bad = true;
  });
  if (bad) return Status::InvalidArgument("meminfo has a malformed value");
  if (total <= 0) return Status::InvalidArgument("meminfo has no MemTotal");
  if (available < 0) {
    if (free < 0) return Status::InvalidArgument("meminfo has neither MemAvailable nor MemFree");
    // Kernels before 3.14: free memory plus what the page cache would give back.
    available = free;
    for (int64_t part : {buffers, cached}) {
      if (part <= 0) continue;
      available = part >= total - available ? total : available + part;  // no overflow
    }
  }
  MemoryUsage u;
  u.total_bytes = total;
  u.used_bytes = available >= total ? 0 : total - available;
  u.source = "host";
  return u;
}

Result<MemoryUsage> ParseCgroup(std::string_view limit_text, std::string_view usage_text,
                                std::string_view stat, const std::string& source) {
  if (stat.size() > kMaxFileBytes)
    return Status::InvalidArgument(source + " memory.stat is too long");
  if (Trim(limit_text) == "max") return Status::NotFound(source + " has no memory limit");
  int64_t limit = 0, usage = 0;
  if (!ParseCount(limit_text, &limit) || limit == 0) {
    return Status::InvalidArgument(source + " memory limit is not a positive number");
  }
  if (limit >= kUnlimited) return Status::NotFound(source + " has no memory limit");
  if (!ParseCount(usage_text, &usage))
    return Status::InvalidArgument(source + " memory usage is not a number");
  // The page cache the kernel drops before it OOM-kills (what `docker stats` leaves out).
  int64_t inactive = 0, total_inactive = -1;
  ForEachLine(stat, ' ', [&](std::string_view key, std::string_view value) {
    int64_t v = 0;
    if (key == "inactive_file" && ParseCount(value, &v)) inactive = v;
    if (key == "total_inactive_file" && ParseCount(value, &v)) total_inactive = v;
  });
  if (total_inactive >= 0) inactive = total_inactive;  // v1: the whole hierarchy's
  if (inactive > usage) inactive = usage;
  MemoryUsage u;
  u.total_bytes = limit;
  u.used_bytes = usage - inactive;
  u.source = source;
  return u;
}

MemoryUsage Tighter(const MemoryUsage& a, const MemoryUsage& b) {
  if (a.total_bytes <= 0) return b;
  if (b.total_bytes <= 0) return a;
  return b.Fraction() > a.Fraction() ? b : a;
}

std::vector<std::string> CgroupAncestors(std::string_view text, bool v2) {
  std::string path;
  bool found = false;
  ForEachLine(text.size() > kMaxFileBytes ? std::string_view() : text, ':',
              [&](std::string_view id, std::string_view rest) {
                // "hierarchy-id:controllers:path"; ForEachLine split off the id.
                size_t colon = rest.find(':');
                if (found || colon == std::string_view::npos) return;
                std::string_view controllers = rest.substr(0, colon);
                bool match = v2 ? id == "0" && controllers.empty() : false;
                while (!v2 && !controllers.empty()) {
                  size_t comma = controllers.find(',');
                  if (controllers.substr(0, comma) == "memory") match = true;
                  controllers = comma == std::string_view::npos ? std::string_view()
                                                                : controllers.substr(comma + 1);
                }
                if (!match) return;
                found = true;
                path = std::string(rest.substr(colon + 1));
              });
  std::vector<std::string> out;
  constexpr size_t kMaxPath = 4096, kMaxDepth = 32;
  bool ok = found && !path.empty() && path[0] == '/' && path.size() <= kMaxPath;
  while (ok && path.size() > 1) {
    if (path.back() == '/') {
      path.pop_back();
      continue;
    }
    if (out.size() >= kMaxDepth || path.find("/../") != std::string::npos ||
        path.find("/./") != std::string::npos ||
        (path.size() >= 3 && path.compare(path.size() - 3, 3, "/..") == 0) ||
        (path.size() >= 2 && path.compare(path.size() - 2, 2, "/.") == 0)) {
      out.clear();
      break;
    }
    out.push_back(path);
    path.resize(path.rfind('/'));
  }
  out.push_back("");
  return out;
}

Result<MemoryUsage> SystemMemoryReader::Read() {
  std::string root = sysroot_ == "/" ? "" : sysroot_;
  std::string errors;
  MemoryUsage best;
  auto meminfo = ReadSmallFile(root + "/proc/meminfo");
  if (meminfo.ok()) {
    auto host = ParseMeminfo(meminfo.value());
    if (host.ok())
      best = host.value();
    else
      errors = host.status().message();
  } else {
    errors = meminfo.status().message();
  }
  // Cgroup limits (a container's, a systemd slice's): v2, else v1's memory controller. A
  // limit on any ancestor applies too.
  auto self = ReadSmallFile(root + "/proc/self/cgroup");
  std::string self_text = self.ok() ? self.value() : std::string();
  struct Files {
    bool v2;
    const char* mount;
    const char* limit;
    const char* usage;
    const char* source;
  };
  for (const Files& f :
       {Files{true, "/sys/fs/cgroup", "/memory.max", "/memory.current", "cgroup v2"},
        Files{false, "/sys/fs/cgroup/memory", "/memory.limit_in_bytes", "/memory.usage_in_bytes",
              "cgroup v1"}}) {
    bool any = false;
    for (const std::string& rel : CgroupAncestors(self_text, f.v2)) {
      std::string dir = root + f.mount + rel;
      auto limit = ReadSmallFile(dir + f.limit);
      if (!limit.ok()) continue;
      any = true;
      auto usage = ReadSmallFile(dir + f.usage);
      auto stat = ReadSmallFile(dir + "/memory.stat");
      auto cg = ParseCgroup(limit.value(), usage.ok() ? usage.value() : std::string(),
                            stat.ok() ? stat.value() : std::string(), f.source);
      if (cg.ok()) {
        best = Tighter(best, cg.value());
      } else if (cg.status().code() != StatusCode::kNotFound) {
        errors += (errors.empty() ? "" : "; ") + dir + ": " + cg.status().message();
      }
    }
    if (any) break;
  }
  if (best.total_bytes <= 0)
    return Status::Unavailable("cannot read this host's memory: " + errors);
  return best;
}

}  // namespace orrery::internal
