// What the head knows of the autoscaler (docs/autoscaler.md): the node groups it last
// announced (a demand one of them could hold waits for it instead of failing as
// infeasible), how long each node has been idle, and the nodes it removed (their
// registrations are ignored from then on). docs/architecture.md "The head".
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/internal/protocol.h"
#include "orrery/resources.h"

namespace orrery::scheduler {

class AutoscalerView {
 public:
  // The groups of a sync, valid for `valid_for_s` from `now` (clamped to [1 s, 1 h]).
  void Update(std::vector<proto::AutoscalerGroupMsg> groups, double valid_for_s, double now);
  bool active(double now) const { return !groups_.empty() && now <= until_; }
  const std::vector<proto::AutoscalerGroupMsg>& groups() const { return groups_; }
  // The name of a group whose nodes could hold `resources` with `selector`, or "" (none, or
  // no autoscaler is active).
  std::string GroupThatHolds(const Resources& resources, const Labels& selector, double now) const;
  // The groups in words, for a demand none of them can hold: "cpu4 {CPU: 4} (max 3), ...".
  std::string GroupsText() const;

  // Node `i` is busy (something runs or is reserved there) or not, at `now`: how long it has
  // been idle (0 when busy).
  double IdleSeconds(int i, bool busy, double now);
  // A node the autoscaler removed: its registrations are ignored from now on.
  void MarkRemoved(const std::string& node_binary_id) { removed_.insert(node_binary_id); }
  bool removed(const std::string& node_binary_id) const { return removed_.count(node_binary_id); }

 private:
  std::vector<proto::AutoscalerGroupMsg> groups_;
  double until_ = 0;
  std::map<int, double> idle_since_;
  std::set<std::string> removed_;
};

}  // namespace orrery::scheduler
