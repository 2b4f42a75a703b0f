#include "scheduler/src/head_autoscaler.h"

#include <nlohmann/json.hpp>

#include "core/internal/log.h"
#include "core/internal/text.h"
#include "orrery/placement.h"
#include "scheduler/src/records.h"

namespace orrery::scheduler {

namespace {

constexpr size_t kMaxNameBytes = 128;
constexpr size_t kMaxRemovedSets = 64;
constexpr size_t kMaxSetSize = 64;

// Groups from the wire: a bounded number, each with a printable name and sane bounds.
std::vector<proto::AutoscalerGroupMsg> CheckedGroups(const proto::AutoscalerSyncMsg& sync) {
  std::vector<proto::AutoscalerGroupMsg> out;
  for (const auto& g : sync.groups) {
    if (out.size() >= proto::kMaxAutoscalerGroups) break;
    if (g.name.empty() || g.name.size() > kMaxNameBytes || !text::IsPrintableToken(g.name) ||
        g.max_nodes < 0 || g.hosts < 1 || !records::CheckUtf8("a group's", g.labels).ok() ||
        !records::CheckUtf8("a group's", g.resources).ok() ||
        !ValidateResources(g.resources).ok()) {
      LOG_WARN("ignoring a malformed autoscaler group " + text::EscapeControl(g.name));
      continue;
    }
    out.push_back(g);
  }
  return out;
}

// The nodes that hold an actor not dead (one pass over the actors).
std::vector<bool> NodesWithActors(const HeadManagers& m) {
  std::vector<bool> out(m.nodes.size(), false);
  for (const auto& [id, a] : m.actors.all())
    if (a.node >= 0 && size_t(a.node) < out.size() && a.state != proto::ActorState::kDead)
      out[size_t(a.node)] = true;
  return out;
}

// Whether something runs or is reserved on node `i`: an actor (even one asking for no
// resources), or anything holding its resources (a lease, a bundle, a job's driver).
bool Busy(const HeadManagers& m, int i, const std::vector<bool>& with_actors) {
  if (with_actors[size_t(i)]) return true;
  const NodeView& v = m.nodes.at(i).view;
  for (const auto& [name, total] : v.total) {
    auto it = v.available.find(name);
    if (it == v.available.end() || it->second + 1e-9 < total) return true;
  }
  return false;
}

void AddDemand(const HeadManagers& m, DemandKind kind, const std::string& id, double waiting,
               proto::AutoscalerStateMsg& out) {
  proto::PendingDemandMsg d;
  d.id = Hex(id);
  d.waiting_s = waiting;
  if (kind == DemandKind::kActor) {
    const ActorEntry* a = m.actors.Find(id);
    if (a == nullptr || !a->spec.options.placement_group.empty()) return;
    d.kind = "actor";
    d.bundles = {a->spec.options.resources};
    d.label_selector = a->spec.options.label_selector;
  } else if (kind == DemandKind::kLease) {
    const LeaseEntry* l = m.leases.Find(id);
    if (l == nullptr || !l->request.placement_group.empty()) return;
    d.kind = "task";
    d.bundles = {l->request.resources};
    d.label_selector = l->request.label_selector;
  } else {
    auto it = m.pgs.all().find(id);
    if (it == m.pgs.all().end()) return;
    const auto& spec = it->second.spec;
    d.kind = "placement_group";
    d.bundles = spec.bundles;
    d.label_selector = spec.label_selector;
    d.strategy = PlacementStrategyName(PlacementStrategy(spec.strategy));
    d.same_label = spec.same_label;
  }
  out.demands.push_back(std::move(d));
}

// Removes each asked-for set whose nodes are all alive and idle; answers those removed.
void Remove(HeadManagers& m, const proto::AutoscalerSyncMsg& sync, double now,
            proto::AutoscalerStateMsg& out) {
  std::vector<bool> with_actors = NodesWithActors(m);
  for (size_t s = 0; s < sync.remove.size() && s < kMaxRemovedSets; ++s) {
    const auto& set = sync.remove[s];
    std::vector<int> nodes;
    for (const auto& hex : set) {
      int i = set.size() <= kMaxSetSize ? m.nodes.IndexOfHex(hex) : -1;
      if (i < 0 || !m.nodes.alive(i) || Busy(m, i, with_actors)) break;
      nodes.push_back(i);
    }
    if (nodes.empty() || nodes.size() != set.size()) continue;
    std::string why = s < sync.remove_reasons.size() ? sync.remove_reasons[s] : "";
    why = "removed by the autoscaler" + (why.empty() ? "" : ": " + text::EscapeControl(why));
    for (int i : nodes) {
      LOG_INFO("node " + m.nodes.HexId(i) + " " + why);
      m.autoscaler.MarkRemoved(m.nodes.at(i).view.id.Binary());
      m.NodeDied(i, why, now);
    }
    out.removed.push_back(set);
  }
}

void KeepStatus(HeadManagers& m, const std::string& status) {
  if (status.empty() || status.size() > proto::kMaxAutoscalerStatusBytes) return;
  nlohmann::json j = nlohmann::json::parse(status, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    LOG_WARN("ignoring an autoscaler status that is not a JSON object");
    return;
  }
  m.ctx.store->Put("autoscaler", "status", records::Dump(j));
  for (const auto& e : j.value("new_events", nlohmann::json::array())) {
    if (!e.is_object()) continue;
    m.ctx.Publish("autoscaler", e.value("group", ""), e.value("action", ""));
  }
}

}  // namespace

proto::AutoscalerStateMsg AutoscalerSync(HeadManagers& m, const proto::AutoscalerSyncMsg& sync,
                                         double now) {
  proto::AutoscalerStateMsg out;
  out.request_id = sync.request_id;
  m.autoscaler.Update(CheckedGroups(sync), sync.valid_for_s, now);
  Remove(m, sync, now, out);
  KeepStatus(m, sync.status_json);
  m.queue.ForEach([&](DemandKind kind, const std::string& id, double since) {
    if (out.demands.size() < proto::kMaxPendingDemandsListed)
      AddDemand(m, kind, id, now - since, out);
  });
  std::vector<bool> with_actors = NodesWithActors(m);
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    if (!m.nodes.alive(int(i))) continue;
    const NodeEntry& e = m.nodes.at(int(i));
    bool busy = Busy(m, int(i), with_actors);
    out.nodes.push_back({e.view.id.Hex(), e.address, e.view.total, e.view.available, e.view.labels,
                         m.autoscaler.IdleSeconds(int(i), busy, now)});
  }
  m.queue.ScheduleAll(now);  // a demand may now wait for a group instead of failing
  return out;
}

}  // namespace orrery::scheduler
