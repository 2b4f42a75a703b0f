// The autoscaler's decisions (docs/autoscaler.md), as pure functions of what the head said
// (waiting demands, nodes) and what is being launched: how many nodes (or slices) of each
// group to add so that the demands fit, fewest first, and which idle ones to remove.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "autoscaler/src/config.h"

namespace orrery::autoscaler {

// A node or slice asked of the provider and not registered yet.
struct Launching {
  std::string group;
  std::vector<std::string> names;  // its node names (a slice: one per host)
};

struct ScaleUp {
  std::string group;
  int count = 0;       // nodes, or slices for a TPU group
  std::string reason;  // "min 1", or the demands it is for
};

struct Plan {
  std::vector<ScaleUp> add;
  // Demands no group can hold, in words (they fail at the head, naming the groups).
  std::vector<std::string> unsatisfiable;
};

Plan PlanScaleUp(const Config& config, const std::vector<proto::AutoscalerNodeMsg>& nodes,
                 const std::vector<proto::PendingDemandMsg>& demands,
                 const std::vector<Launching>& launching);

struct ScaleDown {
  std::string group;
  std::vector<std::string> node_ids;  // hex; a slice's hosts all together
  std::vector<std::string> names;     // their kNodeLabel
  std::string slice;                  // a TPU group's slice name
  std::string reason;
};

// Idle nodes (whole slices) past their group's idle timeout, never below min, highest
// ordinal first and only when every node of the group above it goes too (a StatefulSet
// scales down from the top).
std::vector<ScaleDown> PlanScaleDown(const Config& config,
                                     const std::vector<proto::AutoscalerNodeMsg>& nodes,
                                     const std::vector<Launching>& launching);

// The number at the end of a node or slice name ("cpu-3" -> 3), -1 when none.
int Ordinal(const std::string& name);

}  // namespace orrery::autoscaler
