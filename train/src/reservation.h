// Reserving a training group's workers as placement groups (docs/train.md "What Fit() does",
// step 2; docs/design-decisions.md "A TPU slice is reserved in one step").
//
// CPU and GPU groups: one placement group of num_workers bundles with the scaling config's
// strategy and label selector. TPU groups: one placement group per slice, bundle 0 holding
// the slice's head resource `TPU-<pod type>-head` (so it lands on worker 0 of a slice) and
// one bundle per host, STRICT_SPREAD, all on nodes that share one value of
// `orrery.io/tpu-slice-name` - the head bundle, the slice name and the per-host bundles
// reserved atomically, so no slice is ever held half-reserved.
#pragma once

#include <string>
#include <vector>

#include "core/internal/error_kind.h"
#include "core/internal/protocol_autoscaler.h"
#include "orrery/api/placement_group.h"
#include "orrery/orrery.h"
#include "orrery/status.h"
#include "orrery/train/config.h"

namespace orrery::train {

// The nodes an autoscaler's groups may still add (docs/autoscaler.md), as NodeInfos for
// CheckFeasible: each group's node shape up to its max (at most 64 per group), a TPU group's
// as whole slices (the first host with the slice's head resource). Their address says
// which group they stand for.
std::vector<NodeInfo> NodesThatMayCome(const std::vector<proto::AutoscalerGroupMsg>& groups);

// Fails at once (AcceleratorNotAvailableError / InfeasibleError, as a Status message with
// *kind set) when no live node could ever hold what the group asks for: the slice type no
// host offers (naming the slices that exist), fewer slices than asked for, or a worker's
// resources that no node has in total.
Status CheckFeasible(const ResolvedConfig& config, const ScalingConfig& scaling,
                     const std::vector<NodeInfo>& nodes, proto::ErrorKind* kind);

// The placement groups' options (one per slice for TPUs, else one).
std::vector<PlacementGroupCreationOptions> GroupOptions(const ResolvedConfig& config,
                                                        const ScalingConfig& scaling,
                                                        const std::string& name_prefix);

// The reservation timeout: RunConfig::reservation_timeout_s when >= 0, else
// TRAIN_PLACEMENT_GROUP_TIMEOUT_S, else 100 s. ConfigError for a malformed variable.
double ReservationTimeout(const RunConfig& run);

}  // namespace orrery::train
