// Freed memory kept for the next large values (docs/objects.md "Speed").
#include "core/internal/kept_memory.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/internal/sanitizers.h"
#include "core/internal/thread_annotations.h"
#include "orrery/api/serialize.h"

namespace orrery::internal {
namespace {

std::atomic<uint64_t> g_large_copies{0};
std::atomic<bool> g_kept{false};

// Whether the GLIBC_TUNABLES value `t` chooses how glibc's malloc maps and trims memory.
bool TunablesSetMalloc(const char* t) {
  if (!t) return false;
  return std::strstr(t, "glibc.malloc.mmap_") || std::strstr(t, "glibc.malloc.trim_threshold");
}

// The name of a GLIBC_TUNABLES entry: what comes before its '=' (all of it without one).
std::string_view TunableName(std::string_view entry) { return entry.substr(0, entry.find('=')); }

// Calls fn(entry) for each non-empty ':'-separated entry of `tunables`.
template <typename F>
void ForEachTunable(std::string_view tunables, F&& fn) {
  while (!tunables.empty()) {
    size_t colon = tunables.find(':');
    std::string_view entry = tunables.substr(0, colon);
    if (!entry.empty()) fn(entry);
    if (colon == std::string_view::npos) break;
    tunables.remove_prefix(colon + 1);
  }
}

// glibc's own values (malloc.c: DEFAULT_MMAP_MAX, DEFAULT_TRIM_THRESHOLD).
constexpr int kGlibcMmapMax = 65536;
constexpr int kGlibcTrimThreshold = 128 * 1024;

Mutex g_mu;  // orders turning keeping on and off

// A room a large value lived in: where it starts, the bytes asked for it, and whether user
// code made it (a result) or Orrery did (a landing).
struct Room {
  void* start;
  size_t bytes;
  bool result;
};
// Rooms noted since the last ReclaimLandings (the latest kMaxNotedLandings), and those
// parked. Leaked: landings may be noted while the process exits.
constexpr size_t kMaxNotedLandings = 8;
struct Landings {
  std::atomic<size_t> noted_count{0};   // noted.size(), read without the lock
  std::atomic<size_t> parked_count{0};  // parked.size(), read without the lock
  Mutex mu;
  std::vector<Room> noted GUARDED_BY(mu);
  std::vector<Room> parked GUARDED_BY(mu);
};
Landings& TheLandings() {
  static auto* landings = new Landings;
  return *landings;
}

// Notes `r` (under l.mu), the latest kMaxNotedLandings kept. A room noted already (an
// argument returned as the result) is noted once, as a result if either note says so.
void NoteLocked(Landings& l, const Room& r) REQUIRES(l.mu) {
  for (Room& n : l.noted) {
    if (n.start == r.start) {
      n.bytes = r.bytes;
      n.result = n.result || r.result;
      return;
    }
  }
  if (l.noted.size() == kMaxNotedLandings) l.noted.erase(l.noted.begin());
  l.noted.push_back(r);
  l.noted_count.store(l.noted.size(), std::memory_order_release);
}

// Frees the parked rooms: all of them, or (results_only) those of results, which are noted
// again so that the call's end parks them again if its user code left them free.
void Unpark(bool results_only) {
  Landings& l = TheLandings();
  if (l.parked_count.load(std::memory_order_acquire) == 0) return;
  std::vector<Room> freed;
  {
    MutexLock lock(&l.mu);
    auto kept = std::partition(l.parked.begin(), l.parked.end(),
                               [&](const Room& r) { return results_only && !r.result; });
    freed.assign(kept, l.parked.end());
    l.parked.erase(kept, l.parked.end());
    l.parked_count.store(l.parked.size(), std::memory_order_release);
    if (results_only) {
      for (const Room& r : freed) NoteLocked(l, r);
    }
  }
  for (const Room& r : freed) std::free(r.start);
}

bool Enable() {
#if defined(__GLIBC__)
  if (kSanitized || TunablesSetMalloc(std::getenv("GLIBC_TUNABLES")) || !KeepFreedMemoryWanted())
    return false;
  // Large blocks from the heap, whose freed memory stays mapped, not from mappings of their
  // own; and no trimming of the heap's top below 2 GiB free (KeptMemoryReleaser gives it back).
  if (mallopt(M_MMAP_MAX, 0) != 1) return false;
  if (mallopt(M_TRIM_THRESHOLD, INT_MAX) != 1) return false;
  return true;
#else
  return false;
#endif
}

size_t FreeHeapBytes() {
#if defined(__GLIBC__)
  return mallinfo2().fordblks;
#else
  return 0;
#endif
}

// Hands what the heap keeps free, parked rooms included, back to the kernel; whether any
// went back.
bool GiveBack() {
  Unpark(/*results_only=*/false);
#if defined(__GLIBC__)
  return malloc_trim(0) == 1;
#else
  return false;
#endif
}

}  // namespace

bool KeepFreedMemoryWanted() {
  const char* opt = std::getenv("ORRERY_KEEP_FREED_MEMORY");
  return !opt || std::strcmp(opt, "0") != 0;
}

std::string MergeTunables(const char* user, const char* ours) {
  std::string out = user ? user : "";
  std::set<std::string_view> named;
  ForEachTunable(out, [&](std::string_view e) { named.insert(TunableName(e)); });
  std::string added;
  ForEachTunable(ours, [&](std::string_view e) {
    if (named.count(TunableName(e))) return;
    if ((!out.empty() && out.back() != ':') || !added.empty()) added += ':';
    added += e;
  });
  return out + added;
}

std::string WorkerTunables(const char* user) {
  bool keep = KeepFreedMemoryWanted() && !TunablesSetMalloc(user);
  return MergeTunables(user, keep ? kWorkerTunables : kHugePageTunables);
}

bool KeepFreedMemory() {
  MutexLock lock(&g_mu);
  if (!g_kept.load(std::memory_order_relaxed) && Enable())
    g_kept.store(true, std::memory_order_release);
  return g_kept.load(std::memory_order_relaxed);
}

void StopKeepingFreedMemory() {
  MutexLock lock(&g_mu);
  if (!g_kept.load(std::memory_order_relaxed)) return;
  g_kept.store(false, std::memory_order_release);
#if defined(__GLIBC__)
  Unpark(/*results_only=*/false);
  mallopt(M_MMAP_MAX, kGlibcMmapMax);
  mallopt(M_TRIM_THRESHOLD, kGlibcTrimThreshold);
  malloc_trim(0);
#endif
}

void NoteLanding(const void* room, size_t bytes, bool result) {
  if (!g_kept.load(std::memory_order_acquire)) return;
  Landings& l = TheLandings();
  MutexLock lock(&l.mu);
  NoteLocked(l, {const_cast<void*>(room), bytes, result});  // compared, never written through
}

void ReclaimLandings() noexcept {
  Landings& l = TheLandings();
  if (l.noted_count.load(std::memory_order_acquire) == 0) return;
  std::vector<Room> noted;
  {
    MutexLock lock(&l.mu);
    noted.swap(l.noted);
    l.noted_count.store(0, std::memory_order_release);
  }
  if (!g_kept.load(std::memory_order_acquire)) return;
  for (const Room& r : noted) {
    // Free again: a block of the same size, asked for now, is given that room (the freed
    // block fits it exactly, or starts a little before it, merged with a free neighbour, or
    // has rejoined the top). Never read or written: its pages stay as the value left them.
    void* again = std::malloc(r.bytes);
    auto at = reinterpret_cast<uintptr_t>(again), start = reinterpret_cast<uintptr_t>(r.start);
    if (again && at < start + r.bytes && start < at + r.bytes) {
      MutexLock lock(&l.mu);
      try {
        l.parked.push_back({again, r.bytes, r.result});
      } catch (const std::bad_alloc&) {
        std::free(again);
      }
      l.parked_count.store(l.parked.size(), std::memory_order_release);
    } else {
      std::free(again);
    }
  }
}

size_t ParkedLandingBytes() {
  Landings& l = TheLandings();
  MutexLock lock(&l.mu);
  size_t bytes = 0;
  for (const Room& r : l.parked) bytes += r.bytes;
  return bytes;
}

void MakeRoomForLanding() { Unpark(/*results_only=*/false); }

void MakeRoomForUserCode() { Unpark(/*results_only=*/true); }

void NoteLargeCopy() { g_large_copies.fetch_add(1, std::memory_order_relaxed); }

uint64_t LargeCopies() { return g_large_copies.load(std::memory_order_relaxed); }

KeptMemoryReleaser::KeptMemoryReleaser(std::unique_ptr<MemoryReader> usage)
    : usage_(usage ? std::move(usage) : std::make_unique<SystemMemoryReader>("")) {}

KeptMemoryReleaser::~KeptMemoryReleaser() = default;

bool KeptMemoryReleaser::ReleaseUnderPressure(double now) {
  if (pressure_checked_at_ >= 0 && now - pressure_checked_at_ < kKeptMemoryPressureCheckS)
    return false;
  pressure_checked_at_ = now;
  if (!g_kept.load(std::memory_order_acquire) ||
      FreeHeapBytes() + ParkedLandingBytes() < kKeptMemoryMinBytes)
    return false;
  Result<MemoryUsage> usage = usage_->Read();
  if (!usage.ok() || usage.value().Fraction() < kKeptMemoryPressure) return false;
  released_ = true;
  return GiveBack();
}

bool KeptMemoryReleaser::Tick(double now) {
  if (ReleaseUnderPressure(now)) return true;
  if (checked_at_ >= 0 && now - checked_at_ < kKeptMemoryIdleS) return false;
  uint64_t copies = LargeCopies();
  bool idle = checked_at_ >= 0 && copies == copies_at_check_;
  checked_at_ = now;
  copies_at_check_ = copies;
  if (!idle) {
    released_ = false;
    return false;
  }
  if (released_ || !g_kept.load(std::memory_order_acquire)) return false;
  if (FreeHeapBytes() + ParkedLandingBytes() < kKeptMemoryMinBytes) return false;
  released_ = true;
  return GiveBack();
}

}  // namespace orrery::internal
