#include "scheduler/src/util.h"

namespace orrery::scheduler {

Decision ScheduleSpreadOn(const Demand& demand, const NodeList& view, size_t hint) {
  int best = -1;
  double best_u = 2;
  bool feasible = false;
  size_t n = view.size();
  for (size_t k = 0; k < n; ++k) {
    size_t i = (hint + k) % n;
    const NodeView& node = view[i];
    if (!Eligible(node, demand.label_selector) || !Fits(demand.resources, node.total)) continue;
    feasible = true;
    if (!TakesNow(node, demand.resources)) continue;
    double u = Utilisation(node, demand.resources);
    if (u < best_u) {
      best_u = u;
      best = int(i);
    }
  }
  if (best >= 0) return {Outcome::kPlaced, best, ""};
  if (!feasible)
    return {Outcome::kInfeasible, -1,
            InfeasibleReason(demand.resources, demand.label_selector, view)};
  return {Outcome::kWait, -1,
          "waiting for " + ToString(demand.resources) + " to be free on a node"};
}

}  // namespace orrery::scheduler
