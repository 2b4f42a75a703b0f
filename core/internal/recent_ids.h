// The newest ids a process added to a set, the oldest forgotten first: what a worker
// remembers of the calls it cancelled or ended, a reader of the streams it dropped
// (docs/architecture.md "The client runtime"), and a node of the leases that ended on it,
// for messages about them that may still come.
//
// Not thread-safe: its owner's lock guards it.
#pragma once

#include <deque>
#include <functional>
#include <unordered_set>

namespace orrery {

template <typename Id, typename Hash = std::hash<Id>>
class RecentIds {
 public:
  explicit RecentIds(size_t capacity) : capacity_(capacity) {}
  // Adds `id`, forgetting the oldest beyond the capacity; false when it was there already.
  bool Add(const Id& id) {
    if (!ids_.insert(id).second) return false;
    order_.push_back(id);
    if (order_.size() > capacity_) {
      ids_.erase(order_.front());
      order_.pop_front();
    }
    return true;
  }
  bool Contains(const Id& id) const { return ids_.count(id) > 0; }

 private:
  size_t capacity_;
  std::unordered_set<Id, Hash> ids_;
  std::deque<Id> order_;
};

}  // namespace orrery
