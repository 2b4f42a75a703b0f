#include "train/src/cross_memory.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "train/src/reduce_ops.h"

namespace orrery::train {

namespace {

// One process_vm_readv or process_vm_writev until every byte moved; the kernel may stop at
// a page it cannot reach and return what it did.
template <typename Call>
bool MoveAll(Call call, char* local, uint64_t remote, size_t bytes) {
  while (bytes > 0) {
    iovec here{local, bytes};
    iovec there{reinterpret_cast<void*>(remote), bytes};
    ssize_t n = call(&here, &there);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    local += n;
    remote += uint64_t(n);
    bytes -= size_t(n);
  }
  return true;
}

}  // namespace

bool ReadOtherProcess(pid_t pid, uint64_t from, void* to, size_t bytes) {
  return MoveAll(
      [pid](iovec* here, iovec* there) { return process_vm_readv(pid, here, 1, there, 1, 0); },
      static_cast<char*>(to), from, bytes);
}

bool WriteOtherProcess(pid_t pid, const void* from, uint64_t to, size_t bytes) {
  return MoveAll(
      [pid](iovec* here, iovec* there) { return process_vm_writev(pid, here, 1, there, 1, 0); },
      const_cast<char*>(static_cast<const char*>(from)), to, bytes);
}

CrossMemoryReducer::CrossMemoryReducer(int workers) {
  // Half a megabyte of peers' pieces in all (they stay in the core's cache while folded, with
  // room for the other worker the core may run), at least 16 KiB from each; 4 KiB-aligned
  // so each read starts on a page when the vector does. 128 KiB from each of 3 peers read
  // fastest here (docs/benchmarks.md "All-reduce between vectors").
  const size_t peers = size_t(std::max(workers - 1, 1));
  chunk_ =
      std::clamp((size_t(512) << 10) / peers, size_t(16) << 10, size_t(128) << 10) & ~size_t(4095);
  buffer_.resize(chunk_ * peers);
}

std::string CrossMemoryReducer::Reduce(char* data, size_t begin, size_t end, int rank,
                                       const std::vector<PeerVector>& vectors, int dtype,
                                       ReduceOp op) {
  const size_t n = vectors.size(), esize = ElementSize(dtype);
  std::vector<const char*> sources(n);
  for (size_t at = begin; at < end; at += chunk_) {
    const size_t len = std::min(chunk_, end - at);
    char* slot = buffer_.data();
    for (size_t p = 0; p < n; ++p) {
      if (p == size_t(rank)) {
        sources[p] = data + at;
        continue;
      }
      if (!ReadOtherProcess(vectors[p].pid, vectors[p].address + at, slot, len))
        return "cannot read rank " + std::to_string(p) + "'s vector: " + std::strerror(errno);
      sources[p] = slot;
      slot += chunk_;
    }
    Fold(data + at, nullptr, sources, len / esize, dtype, op);
    for (size_t p = 0; p < n; ++p) {
      if (p == size_t(rank)) continue;
      if (!WriteOtherProcess(vectors[p].pid, data + at, vectors[p].address + at, len))
        return "cannot write rank " + std::to_string(p) + "'s vector: " + std::strerror(errno);
    }
  }
  return "";
}

}  // namespace orrery::train
