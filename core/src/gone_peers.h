// Peers known to be gone (transport::MarkPeerGone), for the sending side of the transport
// (transport_send.cc): every thread closes its own sockets to them, lazily, at its next send.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/internal/thread_annotations.h"

namespace orrery::transport {

// Each address is kept with the generation it was marked in, and a thread looks only at
// those marked since it last looked: a later peer at the same address (a port the kernel
// gave out again) keeps the socket a thread opened to it after the mark.
class GonePeers {
 public:
  explicit GonePeers(size_t capacity = 4096) : capacity_(capacity) {}

  void Mark(const std::string& address) EXCLUDES(mu_);

  // The generation of the latest mark; 0 before any.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  // Calls fn(address) for each address marked after generation `seen` (only the latest
  // `capacity` marks are kept); returns the generation it looked up to.
  template <typename F>
  uint64_t Since(uint64_t seen, F&& fn) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    for (const auto& [marked, address] : marks_)
      if (marked > seen) fn(address);
    return generation_.load(std::memory_order_relaxed);
  }

  // The process's registry.
  static GonePeers& Process();

 private:
  struct Marked {
    uint64_t generation;
    std::string address;
  };
  const size_t capacity_;
  Mutex mu_;
  std::vector<Marked> marks_ GUARDED_BY(mu_);
  std::atomic<uint64_t> generation_{0};
};

}  // namespace orrery::transport
