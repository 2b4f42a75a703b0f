// A node's metrics (docs/metrics.md): its worker processes by kind, its object store, and
// the calls its workers ran (summed from their kWorkerStats reports), as Prometheus text.
// Built on the node's inbox thread; the metrics server only sees the finished text.
#pragma once

#include <map>
#include <string>

#include "core/internal/call_stats.h"
#include "core/internal/protocol.h"

namespace orrery::node {

struct NodeMetricsInput {
  std::string node_id;                         // hex
  std::map<std::string, size_t> worker_kinds;  // "actor", "task", "idle" -> processes
  proto::ObjectStoreUsageMsg object_store;
  NodeCallStats::Totals calls;
};

std::string NodeMetricsText(const NodeMetricsInput& in);

}  // namespace orrery::node
