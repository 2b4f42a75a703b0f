// The newest ids a process added to a set, the oldest forgotten first: what a worker
// remembers of the calls it cancelled or ended, and a reader of the streams it dropped, for
// messages about them that may still come (docs/architecture.md "The client runtime").
//
// Not thread-safe: its owner's lock guards it.
#pragma once

#include <deque>
#include <unordered_set>

#include "orrery/ids.h"

namespace orrery::runtime {

class RecentIds {
 public:
  explicit RecentIds(size_t capacity) : capacity_(capacity) {}
  // Adds `id`, forgetting the oldest beyond the capacity; false when it was there already.
  bool Add(const ObjectId& id) {
    if (!ids_.insert(id).second) return false;
    order_.push_back(id);
    if (order_.size() > capacity_) {
      ids_.erase(order_.front());
      order_.pop_front();
    }
    return true;
  }
  bool Contains(const ObjectId& id) const { return ids_.count(id) > 0; }

 private:
  size_t capacity_;
  std::unordered_set<ObjectId, IdHash> ids_;
  std::deque<ObjectId> order_;
};

}  // namespace orrery::runtime
