// A POSIX shared-memory region that the workers of one host map to all-reduce through
// memory instead of loopback TCP. Rank 0 creates it under a random name and reserves its
// pages (posix_fallocate, so a full /dev/shm is an error here, not a SIGBUS later); the
// others open it by name; rank 0 unlinks the name once everyone has it mapped, so nothing
// is left behind when the processes die.
#pragma once

#include <cstddef>
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

}  // namespace orrery::train
