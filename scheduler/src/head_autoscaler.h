// The head's side of the autoscaler's sync (core/internal/protocol_autoscaler.h,
// docs/autoscaler.md): takes its groups, removes the idle nodes it asks to remove, keeps its
// status in the "autoscaler" table, and answers with the waiting demands and the nodes.
#pragma once

#include "scheduler/src/head_managers.h"

namespace orrery::scheduler {

proto::AutoscalerStateMsg AutoscalerSync(HeadManagers& m, const proto::AutoscalerSyncMsg& sync,
                                         double now);

}  // namespace orrery::scheduler
