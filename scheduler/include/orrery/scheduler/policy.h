// Scheduling policies: pure functions of (demand, cluster view) -> decision. No I/O, no
// clocks; the head calls them and acts on the result (docs/architecture.md "The head").
#pragma once

#include <string>
#include <vector>

#include "orrery/config.h"
#include "orrery/ids.h"
#include "orrery/placement.h"

namespace orrery::scheduler {

struct NodeView {
  NodeId id;
  bool alive = true;
  Resources total;
  Resources available;
  Labels labels;
  // Silent past the head's suspicion threshold (docs/architecture.md "Failure detection"): alive,
  // but no new work is placed there until it is heard from again.
  bool suspected = false;
};

using ClusterView = std::vector<NodeView>;

// The nodes a policy chooses from, by index: a ClusterView, or the head's node table (whose
// entries hold more than the view). A decision's node_index is an index of this list. Each
// policy takes either (the NodeList forms are named ...On, so that a braced list still
// means a ClusterView).
class NodeList {
 public:
  virtual size_t size() const = 0;
  virtual const NodeView& operator[](size_t i) const = 0;

 protected:
  ~NodeList() = default;
};

// A NodeList over a ClusterView (which it must not outlive).
class ClusterViewList final : public NodeList {
 public:
  explicit ClusterViewList(const ClusterView& view) : view_(view) {}
  size_t size() const override { return view_.size(); }
  const NodeView& operator[](size_t i) const override { return view_[i]; }

 private:
  const ClusterView& view_;
};

enum class SchedulingStrategy { kDefault = 0, kSpread = 1, kNodeAffinity = 2 };

struct Demand {
  Resources resources;
  // Equality ("key": "value"), or "in(a,b)" / "!in(a,b)" on the value.
  Labels label_selector;
  SchedulingStrategy strategy = SchedulingStrategy::kDefault;
  NodeId affinity_node;        // kNodeAffinity
  bool affinity_soft = false;  // soft: fall back to the default policy
};

enum class Outcome {
  kPlaced,      // node_index is set
  kWait,        // feasible, but no node has the resources free now
  kInfeasible,  // no alive node could ever hold it
};

struct Decision {
  Outcome outcome = Outcome::kWait;
  int node_index = -1;
  std::string reason;  // for kWait and kInfeasible: why, in words
};

// True when `labels` satisfy every entry of `selector` (core/internal/labels.h).
bool MatchesSelector(const Labels& labels, const Labels& selector);

// Hybrid default: pack onto the first nodes (in view order) while their utilisation stays
// below `spread_threshold`, then choose the least utilised node.
Decision ScheduleHybridOn(const Demand& demand, const NodeList& nodes,
                          double spread_threshold = 0.5);
// ScheduleHybrid for a caller that knows that no node before `first_candidate` is below the
// threshold for this demand (nothing was given back since it last looked: availability only
// fell): the same decision, without scanning those nodes again.
Decision ScheduleHybridFrom(const Demand& demand, const NodeList& nodes, size_t first_candidate,
                            double spread_threshold = 0.5);
// Least utilised feasible node, ties broken by `round_robin_hint`.
Decision ScheduleSpreadOn(const Demand& demand, const NodeList& nodes, size_t round_robin_hint = 0);
Decision ScheduleNodeAffinityOn(const Demand& demand, const NodeList& nodes);
// Dispatches on demand.strategy.
Decision ScheduleOn(const Demand& demand, const NodeList& nodes, size_t round_robin_hint = 0);

inline Decision ScheduleHybrid(const Demand& demand, const ClusterView& view,
                               double spread_threshold = 0.5) {
  return ScheduleHybridOn(demand, ClusterViewList(view), spread_threshold);
}
inline Decision ScheduleSpread(const Demand& demand, const ClusterView& view,
                               size_t round_robin_hint = 0) {
  return ScheduleSpreadOn(demand, ClusterViewList(view), round_robin_hint);
}
inline Decision ScheduleNodeAffinity(const Demand& demand, const ClusterView& view) {
  return ScheduleNodeAffinityOn(demand, ClusterViewList(view));
}
inline Decision Schedule(const Demand& demand, const ClusterView& view,
                         size_t round_robin_hint = 0) {
  return ScheduleOn(demand, ClusterViewList(view), round_robin_hint);
}

struct BundleDecision {
  Outcome outcome = Outcome::kWait;
  std::vector<int> node_of_bundle;  // kPlaced: a node index per bundle
  std::string reason;
};

// Places all bundles atomically with `strategy`. With `same_label` set, every bundle lands
// on nodes that share one value of that label. `selector` restricts the nodes used.
BundleDecision PlaceBundlesOn(const std::vector<Resources>& bundles, PlacementStrategy strategy,
                              const NodeList& nodes, const std::string& same_label = "",
                              const Labels& selector = {});
inline BundleDecision PlaceBundles(const std::vector<Resources>& bundles,
                                   PlacementStrategy strategy, const ClusterView& view,
                                   const std::string& same_label = "",
                                   const Labels& selector = {}) {
  return PlaceBundlesOn(bundles, strategy, ClusterViewList(view), same_label, selector);
}

}  // namespace orrery::scheduler
