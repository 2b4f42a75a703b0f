#include "scheduler/src/head_metrics.h"

#include <map>
#include <nlohmann/json.hpp>

#include "core/internal/metrics.h"
#include "scheduler/src/records.h"

namespace orrery::scheduler {

namespace {
using metrics::Exposition;
using Type = metrics::Exposition::Type;

void AddNodes(Exposition& out, const NodeManager& nodes) {
  size_t alive = 0;
  for (size_t i = 0; i < nodes.size(); ++i) alive += nodes.alive(int(i)) ? 1 : 0;
  out.Begin("orrery_nodes_alive", Type::kGauge, "Nodes the head counts as alive.");
  out.Add({}, double(alive));
  out.Begin("orrery_node_resources_total", Type::kGauge,
            "Resources an alive node offers (memory in bytes).");
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes.alive(int(i))) continue;
    for (const auto& [name, amount] : nodes.at(int(i)).view.total)
      out.Add({{"node", nodes.HexId(int(i))}, {"resource", name}}, amount);
  }
  out.Begin("orrery_node_resources_used", Type::kGauge,
            "Resources of an alive node held by actors, leases and placement groups.");
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes.alive(int(i))) continue;
    const NodeView& v = nodes.at(int(i)).view;
    for (const auto& [name, amount] : v.total) {
      auto free = v.available.find(name);
      double used = amount - (free == v.available.end() ? 0.0 : free->second);
      out.Add({{"node", nodes.HexId(int(i))}, {"resource", name}}, used);
    }
  }
}

// One sample per state, the listed ones always (0 when none), so a query finds them.
void AddByState(Exposition& out, const std::map<std::string, size_t>& counts) {
  for (const auto& [state, n] : counts) out.Add({{"state", state}}, double(n));
}

void AddStates(Exposition& out, const HeadManagers& m) {
  std::map<std::string, size_t> actors = {
      {"PENDING", 0}, {"ALIVE", 0}, {"RESTARTING", 0}, {"DEAD", 0}};
  for (const auto& [id, a] : m.actors.all()) ++actors[records::ActorStateName(a.state)];
  out.Begin("orrery_actors", Type::kGauge, "Actors by state.");
  AddByState(out, actors);
  std::map<std::string, size_t> jobs = {{"RUNNING", 0}, {"FINISHED", 0}};
  uint64_t submitted = 0;
  for (const auto& [id, j] : m.jobs.all()) {
    ++jobs[j.alive ? "RUNNING" : "FINISHED"];
    submitted += j.info.tasks_submitted;
  }
  out.Begin("orrery_jobs", Type::kGauge, "Jobs (drivers) by state.");
  AddByState(out, jobs);
  std::map<std::string, size_t> pgs = {{"PENDING", 0}, {"CREATED", 0}, {"REMOVED", 0}};
  static const char* kPgStates[] = {"PENDING", "CREATED", "REMOVED"};
  for (const auto& [id, pg] : m.pgs.all()) ++pgs[kPgStates[pg.state]];
  out.Begin("orrery_placement_groups", Type::kGauge, "Placement groups by state.");
  AddByState(out, pgs);
  out.Begin("orrery_tasks_submitted_total", Type::kCounter,
            "Tasks and actor calls drivers submitted, as their heartbeats report them.");
  out.Add({}, double(submitted));
}

void AddTrainMetrics(Exposition& out, const DriverRecords& records) {
  out.Begin("orrery_train_metric", Type::kGauge,
            "The latest value of each metric a training run reported.");
  for (const auto& [key, run] : records.run_metrics()) {
    for (const auto& [metric, value] : run.latest)
      out.Add({{"run", key}, {"name", run.name}, {"metric", metric}}, value);
  }
}
}  // namespace

std::string HeadMetricsText(const HeadManagers& m, const StateStore& store) {
  Exposition out;
  AddNodes(out, m.nodes);
  AddStates(out, m);
  out.Begin("orrery_redis_write_latency_seconds", Type::kHistogram,
            "Time of each batch of state writes, from sending it to Redis's last reply.");
  out.AddHistogram({}, store.WriteLatency());
  AddTrainMetrics(out, m.records);
  return out.Take();
}

std::string HeadRecordJson(const std::string& metrics_address) {
  return records::Dump(nlohmann::json{{"metrics_address", metrics_address}});
}

}  // namespace orrery::scheduler
