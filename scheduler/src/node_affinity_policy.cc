#include "scheduler/src/util.h"

namespace orrery::scheduler {

Decision ScheduleNodeAffinityOn(const Demand& demand, const NodeList& view) {
  for (size_t i = 0; i < view.size(); ++i) {
    const NodeView& n = view[i];
    if (n.id != demand.affinity_node) continue;
    if (n.alive && MatchesSelector(n.labels, demand.label_selector) &&
        Fits(demand.resources, n.total)) {
      if (TakesNow(n, demand.resources)) return {Outcome::kPlaced, int(i), ""};
      if (!demand.affinity_soft) {
        return {Outcome::kWait, -1,
                "waiting for " + ToString(demand.resources) + " on node " + n.id.Hex()};
      }
    }
    break;
  }
  if (demand.affinity_soft) {
    Demand fallback = demand;
    fallback.strategy = SchedulingStrategy::kDefault;
    return ScheduleHybridOn(fallback, view);
  }
  return {Outcome::kInfeasible, -1,
          "node " + demand.affinity_node.Hex() + " is not alive or can never hold " +
              ToString(demand.resources)};
}

}  // namespace orrery::scheduler
