// Helpers shared by the scheduling policies.
#pragma once

#include <algorithm>
#include <string>

#include "orrery/resources.h"
#include "orrery/scheduler/policy.h"

namespace orrery::scheduler {

// Highest fraction in use over the resources the demand asks for (0 = idle).
double Utilisation(const NodeView& node, const Resources& demand);

// Why `demand` cannot be placed: "no alive node has {..}; the largest offers {..}".
std::string InfeasibleReason(const Resources& demand, const Labels& selector, const NodeList& view);

// Nodes that are alive and match the selector (a suspected node too: it may recover, so a
// demand it could hold is not infeasible).
bool Eligible(const NodeView& node, const Labels& selector);
// Whether `node` can take `demand` now: free resources, and not suspected.
inline bool TakesNow(const NodeView& node, const Resources& demand) {
  return !node.suspected && Fits(demand, node.available);
}

}  // namespace orrery::scheduler
