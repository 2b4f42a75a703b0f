// Large copies and fresh memory for values handed to user code (docs/objects.md "Speed").
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

#include "core/internal/kept_memory.h"
#include "core/internal/sanitizers.h"
#include "orrery/api/serialize.h"

namespace orrery::internal {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kMaxThreads = 4;

// Under AddressSanitizer the memory is not touched ahead: a vector's room past its size may be
// poisoned (container-overflow annotations).
constexpr bool kTouchAhead = !kAddressSanitizer;

// The threads a job of `n` bytes is split across: one per kParallelCopyBytes / 2, at most
// one per core and kMaxThreads.
size_t ThreadsFor(size_t n) {
  size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max<size_t>(1, std::min({cores, kMaxThreads, n / (kParallelCopyBytes / 2)}));
}

// Runs part(begin, end) over [0, n) split into `threads` page-aligned parts, one on this
// thread and the others on threads of their own. A part whose thread cannot be started (a
// process at its thread limit) runs on this thread.
template <typename Part>
void Split(size_t n, size_t threads, const Part& part) {
  const size_t step = (n / threads + kPage - 1) / kPage * kPage;
  std::vector<std::thread> others;
  others.reserve(threads - 1);
  for (size_t begin = step; begin < n; begin += step) {
    const size_t end = std::min(n, begin + step);
    try {
      others.emplace_back([&part, begin, end] { part(begin, end); });
    } catch (const std::system_error&) {
      part(begin, end);
    }
  }
  part(0, std::min(n, step));
  for (auto& t : others) t.join();
}

void AdviseHugePages(void* p, size_t n) {
  auto start = reinterpret_cast<uintptr_t>(p);
  uintptr_t first = (start + kHugePage - 1) & ~(kHugePage - 1);
  uintptr_t last = (start + n) & ~(kHugePage - 1);
  // Errors are ignored: a kernel without transparent huge pages keeps small ones.
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

}  // namespace

void CopyBytes(void* dst, const void* src, size_t n) {
  if (n >= kFreshValueBytes) NoteLargeCopy();
  size_t threads = n >= kParallelCopyBytes ? ThreadsFor(n) : 1;
  if (threads <= 1) {
    if (n != 0) std::memcpy(dst, src, n);
    return;
  }
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  Split(n, threads,
        [d, s](size_t begin, size_t end) { std::memcpy(d + begin, s + begin, end - begin); });
}

void PrepareFreshMemory(void* p, size_t n) {
  if (n < kFreshValueBytes) return;
  NoteLargeCopy();
  AdviseHugePages(p, n);
  if (!kTouchAhead) return;
  NoteLanding(p, n);
  auto* bytes = static_cast<volatile char*>(p);
  Split(n, ThreadsFor(n), [bytes](size_t begin, size_t end) {
    for (size_t i = begin; i < end; i += kPage) bytes[i] = 0;
  });
}

bool CopyIntoRoom(void* room, const void* src, size_t n) {
  if (!kTouchAhead) return false;
  if (n >= kFreshValueBytes) {
    AdviseHugePages(room, n);
    NoteLanding(room, n);
  }
  CopyBytes(room, src, n);
  return true;
}

}  // namespace orrery::internal
