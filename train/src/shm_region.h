// A POSIX shared-memory region that the workers of one host map to all-reduce through
// memory instead of loopback TCP. Rank 0 creates it under a random name and reserves its
// pages (posix_fallocate, so a full /dev/shm is an error here, not a SIGBUS later); the
// others open it by name; rank 0 unlinks the name once everyone has it mapped, so nothing
// is left behind when the processes die.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "orrery/status.h"

namespace orrery::train {

class ShmRegion {
 public:
  ShmRegion() = default;
  ~ShmRegion();
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;

  // Creates a region of `bytes` with a fresh name (name()).
  Status Create(size_t bytes);
  // Maps the region another process created.
  Status Open(const std::string& name, size_t bytes);
  // Removes the name (the mapping stays).
  void Unlink();

  char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  char* data_ = nullptr;
  size_t size_ = 0;
  bool owner_ = false;
};

// A barrier for `parties` processes (or threads) over two 32-bit words of shared memory
// that start zeroed: how many have arrived, and how many times the barrier has opened. The
// last to arrive resets the count, opens the barrier and wakes the sleepers with one
// futex call; the others watch the generation for a few microseconds, then sleep on it.
// The words are written by the peers: a corrupted word makes a wait time out, never read
// or write anything else.
class ShmBarrier {
 public:
  // words: 8 bytes of shared memory, 4-byte aligned, zeroed before the first Arrive.
  ShmBarrier(void* words, int parties);
  // Counts this party in. Returns true when it was the last (the barrier is open);
  // otherwise *ticket is what WaitOpen waits on.
  bool Arrive(uint32_t* ticket);
  // Waits until the barrier that Arrive gave `ticket` for opens: false when `deadline`
  // passes first (the party stays counted in, and may wait again).
  bool WaitOpen(uint32_t ticket, std::chrono::steady_clock::time_point deadline);

 private:
  std::atomic<uint32_t>* arrived_;
  std::atomic<uint32_t>* generation_;
  uint32_t parties_;
};

}  // namespace orrery::train
