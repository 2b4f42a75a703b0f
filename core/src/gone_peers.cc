#include "core/src/gone_peers.h"

#include <algorithm>

namespace orrery::transport {

void GonePeers::Mark(const std::string& address) {
  MutexLock lock(&mu_);
  uint64_t generation = generation_.load(std::memory_order_relaxed) + 1;
  marks_.push_back({generation, address});
  if (marks_.size() > capacity_) {
    marks_.erase(marks_.begin(), marks_.begin() + std::max<size_t>(1, capacity_ / 2));
  }
  generation_.store(generation, std::memory_order_release);
}

GonePeers& GonePeers::Process() {
  static auto* peers = new GonePeers();  // never destroyed: threads send during exit
  return *peers;
}

}  // namespace orrery::transport
