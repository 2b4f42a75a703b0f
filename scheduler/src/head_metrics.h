// The head's metrics (docs/metrics.md): nodes, their resources, actors, jobs and placement
// groups by state, tasks drivers submitted, the state store's write latency and training
// runs' reported metrics, as Prometheus text. Built on the head's inbox thread from its
// managers; the metrics server only ever sees the finished text.
#pragma once

#include <string>

#include "core/internal/state_store.h"
#include "scheduler/src/head_managers.h"

namespace orrery::scheduler {

std::string HeadMetricsText(const HeadManagers& m, const StateStore& store);

// The record the head keeps of itself in table "head" (docs/redis-schema.md "head").
std::string HeadRecordJson(const std::string& metrics_address);

}  // namespace orrery::scheduler
