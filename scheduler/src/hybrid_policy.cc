#include "scheduler/src/util.h"

namespace orrery::scheduler {

Decision ScheduleHybrid(const Demand& demand, const ClusterView& view, double spread_threshold) {
  int first_below = -1, least = -1;
  double least_u = 2;
  bool feasible = false;
  for (size_t i = 0; i < view.size(); ++i) {
    const NodeView& n = view[i];
    if (!Eligible(n, demand.label_selector)) continue;
    if (!Fits(demand.resources, n.total)) continue;
    feasible = true;
    if (!Fits(demand.resources, n.available)) continue;
    double u = Utilisation(n, demand.resources);
    if (u < spread_threshold && first_below < 0) first_below = int(i);
    if (u < least_u) {
      least_u = u;
      least = int(i);
    }
  }
  if (first_below >= 0) return {Outcome::kPlaced, first_below, ""};
  if (least >= 0) return {Outcome::kPlaced, least, ""};
  if (!feasible)
    return {Outcome::kInfeasible, -1,
            InfeasibleReason(demand.resources, demand.label_selector, view)};
  return {Outcome::kWait, -1,
          "waiting for " + ToString(demand.resources) + " to be free on a node"};
}

Decision Schedule(const Demand& demand, const ClusterView& view, size_t hint) {
  switch (demand.strategy) {
    case SchedulingStrategy::kSpread:
      return ScheduleSpread(demand, view, hint);
    case SchedulingStrategy::kNodeAffinity:
      return ScheduleNodeAffinity(demand, view);
    case SchedulingStrategy::kDefault:
      break;
  }
  return ScheduleHybrid(demand, view);
}

}  // namespace orrery::scheduler
