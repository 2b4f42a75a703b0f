#include "node/src/node_metrics.h"

#include "core/internal/metrics.h"

namespace orrery::node {

std::string NodeMetricsText(const NodeMetricsInput& in) {
  using Type = metrics::Exposition::Type;
  metrics::Exposition out;
  const metrics::Labels node = {{"node", in.node_id}};
  out.Begin("orrery_worker_processes", Type::kGauge,
            "Worker processes of the node: an actor's, a task lease's, or idle.");
  std::map<std::string, size_t> kinds = {{"actor", 0}, {"task", 0}, {"idle", 0}};
  for (const auto& [kind, n] : in.worker_kinds) kinds[kind] = n;
  for (const auto& [kind, n] : kinds) out.Add({{"node", in.node_id}, {"kind", kind}}, double(n));
  out.Begin("orrery_object_store_used_bytes", Type::kGauge,
            "Bytes of the node's shared-memory object store held by objects.");
  out.Add(node, double(in.object_store.used_bytes));
  out.Begin("orrery_object_store_capacity_bytes", Type::kGauge,
            "Size of the node's shared-memory object store.");
  out.Add(node, double(in.object_store.capacity_bytes));
  out.Begin("orrery_object_store_spilled_bytes", Type::kGauge,
            "Bytes of objects the node spilled to disk.");
  out.Add(node, double(in.object_store.spilled_bytes));
  out.Begin("orrery_object_store_objects", Type::kGauge, "Objects the node's store holds.");
  out.Add(node, double(in.object_store.num_objects));
  const NodeCallStats::Totals& c = in.calls;
  out.Begin("orrery_tasks_started_total", Type::kCounter,
            "Task and actor calls the node's workers began to run.");
  out.Add(node, double(c.started));
  out.Begin("orrery_tasks_finished_total", Type::kCounter,
            "Calls of the node's workers that returned a value.");
  out.Add(node, double(c.finished));
  out.Begin("orrery_tasks_failed_total", Type::kCounter,
            "Calls of the node's workers that threw or were cancelled.");
  out.Add(node, double(c.failed));
  out.Begin("orrery_tasks_running", Type::kGauge, "Calls the node's workers are running.");
  uint64_t ended = c.finished + c.failed;
  out.Add(node, c.started > ended ? double(c.started - ended) : 0.0);
  out.Begin("orrery_worker_tasks_submitted_total", Type::kCounter,
            "Tasks and actor calls the node's workers submitted themselves.");
  out.Add(node, double(c.submitted));
  out.Begin("orrery_call_latency_seconds", Type::kHistogram,
            "Run time of the calls the node's workers ran, from start to end.");
  out.AddHistogram(node, c.latency);
  return out.Take();
}

}  // namespace orrery::node
