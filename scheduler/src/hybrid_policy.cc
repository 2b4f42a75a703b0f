#include "scheduler/src/util.h"

namespace orrery::scheduler {

Decision ScheduleHybridOn(const Demand& demand, const NodeList& view, double spread_threshold) {
  int least = -1;
  double least_u = 2;
  bool feasible = false;
  for (size_t i = 0; i < view.size(); ++i) {
    const NodeView& n = view[i];
    if (!Eligible(n, demand.label_selector)) continue;
    if (!Fits(demand.resources, n.total)) continue;
    feasible = true;
    if (!TakesNow(n, demand.resources)) continue;
    double u = Utilisation(n, demand.resources);
    // The first node below the threshold wins: no need to look further.
    if (u < spread_threshold) return {Outcome::kPlaced, int(i), ""};
    if (u < least_u) {
      least_u = u;
      least = int(i);
    }
  }
  if (least >= 0) return {Outcome::kPlaced, least, ""};
  if (!feasible)
    return {Outcome::kInfeasible, -1,
            InfeasibleReason(demand.resources, demand.label_selector, view)};
  return {Outcome::kWait, -1,
          "waiting for " + ToString(demand.resources) + " to be free on a node"};
}

Decision ScheduleHybridFrom(const Demand& demand, const NodeList& view, size_t first_candidate,
                            double spread_threshold) {
  for (size_t i = first_candidate; i < view.size(); ++i) {
    const NodeView& n = view[i];
    if (!Eligible(n, demand.label_selector) || !Fits(demand.resources, n.total) ||
        !TakesNow(n, demand.resources))
      continue;
    if (Utilisation(n, demand.resources) < spread_threshold) return {Outcome::kPlaced, int(i), ""};
  }
  return ScheduleHybridOn(demand, view, spread_threshold);  // none below: the full decision
}

Decision ScheduleOn(const Demand& demand, const NodeList& view, size_t hint) {
  switch (demand.strategy) {
    case SchedulingStrategy::kSpread:
      return ScheduleSpreadOn(demand, view, hint);
    case SchedulingStrategy::kNodeAffinity:
      return ScheduleNodeAffinityOn(demand, view);
    case SchedulingStrategy::kDefault:
      break;
  }
  return ScheduleHybridOn(demand, view);
}

}  // namespace orrery::scheduler
