// Freed memory kept for a process's next large values, and given back once they stop coming
// (docs/objects.md "Speed").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/internal/memory_usage.h"

namespace orrery::internal {

// How often kept memory is looked at (it goes back once a whole such period passed with no
// large copy made: 10 to 20 s after the last), and the least free memory worth giving back.
inline constexpr double kKeptMemoryIdleS = 10;
inline constexpr size_t kKeptMemoryMinBytes = size_t{64} << 20;
// While at least this fraction of the memory that applies (the host's, or the cgroup's
// limit: memory_usage.h) is in use, kept memory goes back at once, whatever copies are being
// made; looked at no more than once per kKeptMemoryPressureCheckS, and only while at least
// kKeptMemoryMinBytes is kept. Below the node's memory monitor's default threshold (0.95),
// so that memory a process keeps does not get a worker killed.
inline constexpr double kKeptMemoryPressure = 0.8;
inline constexpr double kKeptMemoryPressureCheckS = 1;

// Makes the C library keep what the process frees for its next allocations, where it would
// hand each large block (glibc: above 128 KiB to 32 MiB) back to the kernel at once: a value
// that lands in a new vector (a Get, an argument, the user's own copy of either) then reuses
// memory already present instead of faulting in, and zeroing, new pages. A runtime turns it on
// when it starts and off when it stops. Not where ORRERY_KEEP_FREED_MEMORY=0, where
// GLIBC_TUNABLES sets glibc.malloc's mmap or trim settings itself (the user's setting wins),
// under a sanitizer (it brings its own allocator) or outside glibc. Returns whether it is on.
bool KeepFreedMemory();

// Gives glibc's defaults back (large blocks mapped apart again) and what was kept to the
// kernel, if KeepFreedMemory turned keeping on.
void StopKeepingFreedMemory();

// Whether ORRERY_KEEP_FREED_MEMORY leaves keeping on (it is unless "0"): a node asks it for the
// environment it gives its workers.
bool KeepFreedMemoryWanted();

// The GLIBC_TUNABLES a node gives its workers beside the user's own: glibc's transparent huge
// pages for large blocks and, while keeping is wanted, one arena, so that a call's thread
// allocates from the heap whose freed memory the worker keeps (a thread's own arena maps every
// block of 64 MiB or more apart and unmaps it when freed). A process a worker starts (an
// entrypoint's framework) gets the huge pages alone, its arenas its own.
inline constexpr char kWorkerTunables[] = "glibc.malloc.hugetlb=1:glibc.malloc.arena_max=1";
inline constexpr char kHugePageTunables[] = "glibc.malloc.hugetlb=1";
// Where a node puts what an entrypoint's framework process gets as its GLIBC_TUNABLES.
inline constexpr char kFrameworkTunablesEnv[] = "ORRERY_FRAMEWORK_GLIBC_TUNABLES";

// `user` (a GLIBC_TUNABLES value; null or empty: none) with each `name=value` of `ours`
// whose name it does not set appended: the user's settings win, one by one.
std::string MergeTunables(const char* user, const char* ours);
// What a node gives its workers, given its own GLIBC_TUNABLES (`user`): kWorkerTunables
// merged in, or only kHugePageTunables where keeping is not wanted or the user chose glibc's
// mmap or trim settings (the workers do not keep memory then, and one arena would only
// serialise their threads' allocations).
std::string WorkerTunables(const char* user);

// The room of a large value that is let go, taken back for the next one (docs/objects.md
// "Speed"). A large value lands in a new vector at the heap's top; while it lives, small
// blocks are allocated above it, so once it is freed its room cannot rejoin the top, and the
// small blocks allocated next carve it (glibc gives a small request the smallest free block
// that holds it): the next large value no longer fits there and lands in new memory, which
// the kernel faults in and zeroes again. So the rooms large values live in are noted, looked
// at once they are let go and, where free again, held (parked) until the next large value is
// about to land, or for the room of a result, until the next call's user code is about to
// run: the functions of serialize.h (NoteLanding, ReclaimLandings, MakeRoomForLanding,
// MakeRoomForUserCode). Only while freed memory is kept (KeepFreedMemory); what is parked
// goes back with the rest of what is kept. ParkedLandingBytes: the bytes parked now.
size_t ParkedLandingBytes();

// Counts a copy of a large value (kFreshValueBytes and more) into or out of the process's
// memory: kept memory is in use (fresh_memory.cc counts its copies).
void NoteLargeCopy();

// The copies counted so far.
uint64_t LargeCopies();

// Gives kept memory back to the kernel (malloc_trim) once no large copy has been made from one
// look to the next, kKeptMemoryIdleS apart, as an allocator that keeps freed memory gives it
// back after a delay; and at once while memory runs short (kKeptMemoryPressure). The runtime
// calls Tick from its periodic tick; one instance per caller, not thread-safe.
class KeptMemoryReleaser {
 public:
  // `usage` reads how much memory is in use; null: the system's (SystemMemoryReader).
  explicit KeptMemoryReleaser(std::unique_ptr<MemoryReader> usage = nullptr);
  ~KeptMemoryReleaser();
  // `now` is monotonic seconds. Returns true when it gave memory back on this call.
  bool Tick(double now);

 private:
  // Gives kept memory back if memory runs short; looks at most once per
  // kKeptMemoryPressureCheckS.
  bool ReleaseUnderPressure(double now);

  std::unique_ptr<MemoryReader> usage_;
  double pressure_checked_at_ = -1;
  double checked_at_ = -1;
  uint64_t copies_at_check_ = 0;
  bool released_ = false;  // given back since the last copy: nothing new to give
};

}  // namespace orrery::internal
