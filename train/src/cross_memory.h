// Copies between the memory of two processes of one user with process_vm_readv and
// process_vm_writev (cross memory attach): one copy, straight from one process's vector into
// another's, with no shared segment in between. The kernel allows it when the caller may
// ptrace the other process: the same user, the other one dumpable, and - where Yama's
// ptrace_scope is 1 or more - only an ancestor, so sibling workers fall back to the
// shared-memory copy (collective.h). Seccomp profiles may refuse the calls too; every call
// here reports failure instead of throwing.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "orrery/train/context.h"

namespace orrery::train {

// Copies `bytes` from address `from` of process `pid` into `to`: false unless all came.
bool ReadOtherProcess(pid_t pid, uint64_t from, void* to, size_t bytes);
// Copies `bytes` from `from` to address `to` of process `pid`: false unless all went.
bool WriteOtherProcess(pid_t pid, const void* from, uint64_t to, size_t bytes);

// Where one worker's vector lies: its process and the vector's first byte there.
struct PeerVector {
  pid_t pid = 0;
  uint64_t address = 0;
};

// Reduces one segment of every worker's vector and writes the result into all of them.
class CrossMemoryReducer {
 public:
  // For a group of `workers` (>= 2); the buffers are kept for every later call.
  explicit CrossMemoryReducer(int workers);

  // Bytes [begin, end) of vectors[p] for every p, folded with op in rank order, are written
  // to the same bytes of `data` (this worker's vector, rank `rank`) and of every other
  // vector, chunk by chunk so that the peers' pieces are read into cache-sized buffers once
  // and each result is written straight to every worker. begin and end are multiples of the
  // element size. Nobody else may touch these bytes meanwhile. Returns what went wrong
  // ("" when nothing did): a peer that cannot be read or written.
  std::string Reduce(char* data, size_t begin, size_t end, int rank,
                     const std::vector<PeerVector>& vectors, int dtype, ReduceOp op);

  // Bytes read from each peer at a time: a multiple of every element size.
  size_t chunk_bytes() const { return chunk_; }

 private:
  size_t chunk_;
  std::vector<char> buffer_;  // (workers - 1) chunks
};

}  // namespace orrery::train
