#include "scheduler/src/resource_book.h"

#include "orrery/resources.h"

namespace orrery::scheduler {

Decision ResourceBook::Reserve(const DemandRef& d, int* bundle) {
  *bundle = -1;
  if (!d.placement_group.empty())
    return pgs_.ReserveInBundle(d.placement_group, d.bundle_index, d.resources, bundle);
  Demand demand{d.resources, d.selector, SchedulingStrategy(d.strategy),
                NodeId(UniqueId::FromBinary(d.affinity_node)), d.affinity_soft};
  Decision decision;
  if (demand.strategy == SchedulingStrategy::kDefault) {
    // Packing: start where the last demand of this shape was placed, as long as nothing was
    // given back since (the nodes before it are still above the threshold).
    if (cursor_epoch_ != nodes_.epoch()) {
      cursors_.clear();
      cursor_epoch_ = nodes_.epoch();
    }
    std::string shape = ToString(d.resources) + ToString(d.selector);
    auto cursor = cursors_.find(shape);
    decision =
        ScheduleHybridFrom(demand, nodes_.list(), cursor == cursors_.end() ? 0 : cursor->second);
    if (decision.outcome == Outcome::kPlaced) {
      if (cursor != cursors_.end()) {
        cursor->second = size_t(decision.node_index);
      } else if (cursors_.size() < kMaxCursors) {
        cursors_.emplace(std::move(shape), size_t(decision.node_index));
      }
    }
  } else {
    decision = ScheduleOn(demand, nodes_.list(), round_robin_++);
  }
  if (decision.outcome == Outcome::kPlaced)
    Subtract(nodes_.available(decision.node_index), d.resources);
  if (decision.outcome == Outcome::kInfeasible) ConsiderAutoscaler(d, decision);
  return decision;
}

void ResourceBook::ConsiderAutoscaler(const DemandRef& d, Decision& decision) const {
  double now = Now();
  if (autoscaler_ == nullptr || !autoscaler_->active(now)) return;
  bool pinned = !d.affinity_node.empty() && !d.affinity_soft;  // a new node is another node
  std::string group = pinned ? "" : autoscaler_->GroupThatHolds(d.resources, d.selector, now);
  if (!group.empty()) {
    decision.outcome = Outcome::kWait;
    decision.reason = "waiting for the autoscaler to add a node of group '" + group + "' (" +
                      decision.reason + ")";
  } else {
    decision.reason +=
        "; no autoscaler group can hold it either (groups: " + autoscaler_->GroupsText() + ")";
  }
}

void ResourceBook::Release(int node, const std::string& pg_id, int bundle,
                           const Resources& demand) {
  if (!pg_id.empty()) return pgs_.ReleaseInBundle(pg_id, bundle, demand);
  if (node >= 0 && node < int(nodes_.size())) nodes_.Give(node, demand);
}

void ResourceBook::Hold(int node, const std::string& pg_id, int* bundle, const Resources& demand) {
  if (!pg_id.empty() && pgs_.HoldInBundle(pg_id, *bundle, demand)) return;
  *bundle = -1;
  Subtract(nodes_.available(node), demand);
}

}  // namespace orrery::scheduler
