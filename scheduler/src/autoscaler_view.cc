#include "scheduler/src/autoscaler_view.h"

#include <algorithm>

#include "orrery/scheduler/policy.h"

namespace orrery::scheduler {

void AutoscalerView::Update(std::vector<proto::AutoscalerGroupMsg> groups, double valid_for_s,
                            double now) {
  groups_ = std::move(groups);
  until_ = now + std::clamp(valid_for_s, 1.0, 3600.0);
}

std::string AutoscalerView::GroupThatHolds(const Resources& resources, const Labels& selector,
                                           double now) const {
  if (!active(now)) return "";
  for (const auto& g : groups_) {
    if (g.max_nodes <= 0 || !MatchesSelector(g.labels, selector)) continue;
    if (Fits(resources, g.resources)) return g.name;
    Resources first = g.resources;  // a slice's first host has more
    for (const auto& [k, v] : g.head_resources) first[k] += v;
    if (!g.head_resources.empty() && Fits(resources, first)) return g.name;
  }
  return "";
}

std::string AutoscalerView::GroupsText() const {
  std::string out;
  for (const auto& g : groups_) {
    out += (out.empty() ? "" : ", ") + g.name + " " + ToString(g.resources);
    if (!g.labels.empty()) out += " " + ToString(g.labels);
    out += " (max " + std::to_string(g.max_nodes) + (g.hosts > 1 ? " hosts)" : ")");
  }
  return out;
}

double AutoscalerView::IdleSeconds(int i, bool busy, double now) {
  if (busy) {
    idle_since_.erase(i);
    return 0;
  }
  auto [it, added] = idle_since_.emplace(i, now);
  return now - it->second;
}

}  // namespace orrery::scheduler
