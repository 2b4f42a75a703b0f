#include "autoscaler/internal/autoscaler.h"

#include <algorithm>
#include <set>

#include "core/internal/ask.h"
#include "core/internal/clock.h"
#include "core/internal/labels.h"
#include "core/internal/log.h"

namespace orrery::autoscaler {

namespace {

constexpr int kSyncTimeoutMs = 5000;
constexpr size_t kKeptEvents = 50;
constexpr double kFirstBackoffS = 1, kMaxBackoffS = 60;

std::string Describe(const Unit& unit) {
  return unit.slice.empty() ? "node " + unit.names[0] : "slice " + unit.slice;
}

}  // namespace

Autoscaler::Autoscaler(Options options) : o_(std::move(options)) {
  for (const auto& g : o_.config.groups)
    providers_[g.name] =
        o_.make_provider ? o_.make_provider(g)
                         : MakeProvider(g.provider, o_.head, o_.orrery_path, o_.env, o_.node_args);
}

Autoscaler::~Autoscaler() { Shutdown(); }

void Autoscaler::Shutdown() {
  for (const auto& r : unremoved_)
    LOG_WARN("autoscaler: " + Describe(r.unit) + " of group " + r.unit.group->name +
             " was never removed; it may still run");
  unremoved_.clear();
  for (auto& [name, p] : providers_) p->Shutdown();
}

const GroupConfig* Autoscaler::Group(const std::string& name) const {
  for (const auto& g : o_.config.groups)
    if (g.name == name) return &g;
  return nullptr;
}

int Autoscaler::Units(const std::string& group,
                      const std::vector<proto::AutoscalerNodeMsg>& nodes) const {
  std::set<std::string> units;
  for (const auto& n : nodes) {
    if (LabelValue(n.labels, kGroupLabel) != group) continue;
    std::string slice = LabelValue(n.labels, kTpuSliceNameLabel);
    units.insert(slice.empty() ? n.node_id : slice);
  }
  int launching = 0;
  for (const auto& p : launching_) launching += p.launch.group == group;
  return int(units.size()) + launching;
}

void Autoscaler::Event(const std::string& group, const std::string& action, int count,
                       const std::string& reason) {
  nlohmann::json e{{"time", WallSeconds()},
                   {"group", group},
                   {"action", action},
                   {"count", count},
                   {"reason", reason}};
  LOG_INFO("autoscaler: " + action + " " + std::to_string(count) + " of group " + group + ": " +
           reason);
  events_.push_back(e);
  if (events_.size() > kKeptEvents) events_.pop_front();
  new_events_.push_back(std::move(e));
}

void Autoscaler::Failed(const std::string& group, const std::string& error, double now) {
  Backoff& b = backoff_[group];
  b.delay = b.delay <= 0 ? kFirstBackoffS : std::min(kMaxBackoffS, b.delay * 2);
  b.next_try = now + b.delay;
  b.error = error;
  char retry[64];
  std::snprintf(retry, sizeof(retry), "; retrying in %.0f s", b.delay);
  Event(group, "error", 0, error + retry);
}

Result<proto::AutoscalerStateMsg> Autoscaler::Sync(std::vector<ScaleDown> remove) {
  proto::AutoscalerSyncMsg m;
  for (const auto& g : o_.config.groups) m.groups.push_back(g.Shape());
  m.valid_for_s = std::max(30.0, 5 * o_.config.interval_s);
  for (auto& r : remove) {
    m.remove.push_back(r.node_ids);
    m.remove_reasons.push_back("group " + r.group + ", " + r.reason);
  }
  m.status_json = StatusJson(last_nodes_);
  std::string to = o_.head.find("://") == std::string::npos ? "tcp://" + o_.head : o_.head;
  auto reply = Ask<proto::AutoscalerStateMsg>(o_.answer_host, to, proto::MsgType::kAutoscalerSync,
                                              std::move(m), proto::MsgType::kAutoscalerState,
                                              kSyncTimeoutMs);
  if (reply.ok()) new_events_ = nlohmann::json::array();  // the head has published them
  return reply;
}

void Autoscaler::TrackLaunches(const std::vector<proto::AutoscalerNodeMsg>& nodes, double now) {
  std::set<std::string> up;
  for (const auto& n : nodes) up.insert(LabelValue(n.labels, kNodeLabel));
  for (const auto& name : [&] {
         std::vector<std::string> all;
         for (auto& [g, p] : providers_)
           for (auto& n : p->Reap()) all.push_back(n);
         return all;
       }()) {
    LOG_WARN("autoscaler: node " + name + " exited");
  }
  for (auto it = launching_.begin(); it != launching_.end();) {
    bool all_up = std::all_of(it->launch.names.begin(), it->launch.names.end(),
                              [&](const std::string& n) { return up.count(n) > 0; });
    if (all_up) {
      it = launching_.erase(it);
    } else if (now - it->started > o_.config.launch_timeout_s) {
      std::string group = it->launch.group;
      (void)Remove(it->unit, now);
      Failed(group,
             "node " + it->launch.names[0] + " did not join within " +
                 std::to_string(int(o_.config.launch_timeout_s)) + " s",
             now);
      it = launching_.erase(it);
    } else {
      ++it;
    }
  }
}

void Autoscaler::ScaleUpGroup(const ScaleUp& up, const std::vector<proto::AutoscalerNodeMsg>& nodes,
                              double now) {
  const GroupConfig* g = Group(up.group);
  if (g == nullptr) return;
  Backoff& b = backoff_[up.group];
  if (now < b.next_try) return;
  std::set<int> used;
  for (const auto& n : nodes) {
    if (LabelValue(n.labels, kGroupLabel) != g->name) continue;
    used.insert(Ordinal(g->is_tpu ? LabelValue(n.labels, kTpuSliceNameLabel)
                                  : LabelValue(n.labels, kNodeLabel)));
  }
  for (const auto& p : launching_)
    if (p.launch.group == g->name)
      used.insert(Ordinal(p.unit.slice.empty() ? p.launch.names[0] : p.unit.slice));
  for (const auto& r : unremoved_)
    if (r.unit.group == g)
      used.insert(Ordinal(r.unit.slice.empty() ? r.unit.names[0] : r.unit.slice));
  int added = 0;
  for (int i = 0; i < up.count; ++i) {
    int ord = 0;
    while (used.count(ord)) ++ord;
    used.insert(ord);
    Unit unit;
    unit.group = g;
    std::string base = g->name + "-" + std::to_string(ord);
    if (g->is_tpu) {
      unit.slice = base;
      for (int h = 0; h < g->hosts(); ++h) unit.names.push_back(base + "-" + std::to_string(h));
    } else {
      unit.names.push_back(base);
    }
    unit.group_size = Units(g->name, nodes) + 1;
    Status s = providers_[g->name]->Create(unit);
    if (!s.ok()) {
      if (added) Event(g->name, "scale_up", added, up.reason);
      return Failed(g->name, "adding " + base + ": " + s.message(), now);
    }
    launching_.push_back({{g->name, unit.names}, unit, now});
    ++added;
  }
  b = Backoff{};
  Event(g->name, "scale_up", added, up.reason);
}

Status Autoscaler::Remove(const Unit& unit, double now) {
  Status s = providers_[unit.group->name]->Remove(unit);
  if (!s.ok()) RemovalFailed(Unremoved{unit}, s, now);
  return s;
}

void Autoscaler::RemovalFailed(Unremoved r, const Status& status, double now) {
  r.delay = r.delay <= 0 ? kFirstBackoffS : std::min(kMaxBackoffS, r.delay * 2);
  r.next_try = now + r.delay;
  char retry[64];
  std::snprintf(retry, sizeof(retry), "; retrying in %.0f s", r.delay);
  Event(r.unit.group->name, "error", 0,
        "removing " + Describe(r.unit) + " failed: " + status.message() + retry);
  unremoved_.push_back(std::move(r));
}

void Autoscaler::RetryRemovals(double now) {
  std::vector<Unremoved> due;
  for (auto it = unremoved_.begin(); it != unremoved_.end();) {
    if (it->next_try > now) {
      ++it;
      continue;
    }
    due.push_back(std::move(*it));
    it = unremoved_.erase(it);
  }
  for (auto& r : due) {
    Status s = providers_[r.unit.group->name]->Remove(r.unit);
    if (s.ok())
      Event(r.unit.group->name, "scale_down", 1, "removed " + Describe(r.unit) + " on retry");
    else
      RemovalFailed(std::move(r), s, now);
  }
}

void Autoscaler::Removed(const ScaleDown& down, const std::vector<proto::AutoscalerNodeMsg>& nodes,
                         double now) {
  const GroupConfig* g = Group(down.group);
  if (g == nullptr) return;
  Unit unit;
  unit.group = g;
  unit.names = down.names;
  unit.slice = down.slice;
  unit.group_size = std::max(0, Units(g->name, nodes) - 1);
  Event(g->name, "scale_down", 1, Describe(unit) + " " + down.reason);
  (void)Remove(unit, now);  // a failure is reported and retried
}

void Autoscaler::Grow(const proto::AutoscalerStateMsg& state, double now) {
  const std::vector<proto::AutoscalerNodeMsg>& nodes = state.nodes;
  last_nodes_ = nodes;
  RetryRemovals(now);
  TrackLaunches(nodes, now);
  std::vector<Launching> launching;
  for (const auto& p : launching_) launching.push_back(p.launch);
  Plan plan = PlanScaleUp(o_.config, nodes, state.demands, launching);
  if (plan.unsatisfiable != unsatisfiable_ && !plan.unsatisfiable.empty())
    LOG_WARN("autoscaler: no group can hold " + plan.unsatisfiable[0] +
             (plan.unsatisfiable.size() > 1 ? " (and others)" : ""));
  unsatisfiable_ = plan.unsatisfiable;
  for (const auto& up : plan.add) ScaleUpGroup(up, nodes, now);
}

Status Autoscaler::Tick(double now) {
  auto state = Sync({});
  if (!state.ok()) return state.status();
  const std::vector<proto::AutoscalerNodeMsg>& nodes = state.value().nodes;
  Grow(state.value(), now);
  std::vector<Launching> launching;
  for (const auto& p : launching_) launching.push_back(p.launch);
  std::vector<ScaleDown> downs = PlanScaleDown(o_.config, nodes, launching);
  if (downs.empty()) return Status::Ok();
  auto removed = Sync(downs);
  if (!removed.ok()) return removed.status();
  for (const auto& set : removed.value().removed)
    for (const auto& d : downs)
      if (d.node_ids == set) Removed(d, nodes, now);
  last_nodes_ = removed.value().nodes;
  return Status::Ok();
}

std::string Autoscaler::StatusJson(const std::vector<proto::AutoscalerNodeMsg>& nodes) const {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : o_.config.groups) {
    int launching = 0;
    for (const auto& p : launching_) launching += p.launch.group == g.name;
    auto b = backoff_.find(g.name);
    groups.push_back({{"name", g.name},
                      {"shape", ToString(g.resources)},
                      {"min", g.min},
                      {"max", g.max},
                      {"unit", g.is_tpu ? "slice of " + std::to_string(g.hosts()) + " hosts"
                                        : std::string("node")},
                      {"nodes", Units(g.name, nodes) - launching},
                      {"launching", launching},
                      {"error", b == backoff_.end() ? "" : b->second.error}});
  }
  return nlohmann::json{{"time", WallSeconds()},     {"interval_s", o_.config.interval_s},
                        {"groups", groups},          {"events", nlohmann::json(events_)},
                        {"new_events", new_events_}, {"unsatisfiable", unsatisfiable_}}
      .dump();
}

}  // namespace orrery::autoscaler
