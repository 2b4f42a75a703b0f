#include "autoscaler/src/planner.h"

#include <algorithm>
#include <set>

#include "core/internal/labels.h"

namespace orrery::autoscaler {

namespace {

// Room on one node, existing or to come.
struct Bin {
  Resources free;
  Labels labels;
};

// The bins of one unit (a node, or a slice's hosts) of group `g`, named `slice`.
std::vector<Bin> UnitBins(const GroupConfig& g, const std::string& slice) {
  proto::AutoscalerGroupMsg shape = g.Shape();
  std::vector<Bin> out;
  for (int h = 0; h < g.hosts(); ++h) {
    Bin b{shape.resources, shape.labels};
    if (g.is_tpu) {
      b.labels[kTpuSliceNameLabel] = slice;
      if (h == 0)
        for (const auto& [k, v] : shape.head_resources) b.free[k] += v;
    }
    out.push_back(std::move(b));
  }
  return out;
}

// Places every bundle of `d` on `bins` (subtracting), or changes nothing and returns false.
bool PlaceOn(const proto::PendingDemandMsg& d, std::vector<Bin>& bins) {
  auto try_subset = [&](const std::vector<size_t>& candidates) {
    std::vector<Bin> trial = bins;
    std::set<size_t> used;
    if (d.strategy == "STRICT_PACK") {
      Resources sum;
      for (const auto& b : d.bundles)
        for (const auto& [k, v] : b) sum[k] += v;
      for (size_t i : candidates) {
        if (!Fits(sum, trial[i].free)) continue;
        Subtract(trial[i].free, sum);
        bins = std::move(trial);
        return true;
      }
      return false;
    }
    for (const auto& b : d.bundles) {
      bool placed = false;
      for (size_t i : candidates) {
        if ((d.strategy == "STRICT_SPREAD" && used.count(i)) || !Fits(b, trial[i].free)) continue;
        Subtract(trial[i].free, b);
        used.insert(i);
        placed = true;
        break;
      }
      if (!placed) return false;
    }
    bins = std::move(trial);
    return true;
  };
  std::map<std::string, std::vector<size_t>> by_value;  // same_label's value -> bins
  for (size_t i = 0; i < bins.size(); ++i) {
    if (!MatchesSelector(bins[i].labels, d.label_selector)) continue;
    std::string v = d.same_label.empty() ? "" : LabelValue(bins[i].labels, d.same_label);
    if (!d.same_label.empty() && v.empty()) continue;
    by_value[v].push_back(i);
  }
  for (const auto& [value, candidates] : by_value)
    if (try_subset(candidates)) return true;
  return false;
}

// Whether a node of group `g` could hold every bundle of `d` on its own (the group is worth
// growing for it).
bool GroupCanHold(const GroupConfig& g, const proto::PendingDemandMsg& d) {
  std::vector<Bin> one = UnitBins(g, "probe");
  for (const auto& b : d.bundles) {
    bool fits = false;
    for (const auto& bin : one)
      fits = fits || (MatchesSelector(bin.labels, d.label_selector) && Fits(b, bin.free));
    if (!fits) return false;
  }
  return true;
}

std::string Describe(const proto::PendingDemandMsg& d) {
  std::string out = d.kind + " " + d.id.substr(0, 8);
  if (d.bundles.size() == 1) return out + " " + ToString(d.bundles[0]);
  return out + " (" + std::to_string(d.bundles.size()) + " bundles, " + d.strategy + ")";
}

}  // namespace

int Ordinal(const std::string& name) {
  size_t end = name.size(), start = end;
  while (start > 0 && std::isdigit(static_cast<unsigned char>(name[start - 1]))) --start;
  if (start == end || end - start > 6) return -1;
  return std::stoi(name.substr(start));
}

Plan PlanScaleUp(const Config& config, const std::vector<proto::AutoscalerNodeMsg>& nodes,
                 const std::vector<proto::PendingDemandMsg>& demands,
                 const std::vector<Launching>& launching) {
  Plan plan;
  std::vector<Bin> bins;
  std::map<std::string, int> units;  // group -> nodes (slices) it has or will have
  std::set<std::string> slices_seen;
  for (const auto& n : nodes) {
    bins.push_back({n.available, n.labels});
    std::string group = LabelValue(n.labels, kGroupLabel);
    std::string slice = LabelValue(n.labels, kTpuSliceNameLabel);
    if (group.empty()) continue;
    if (slice.empty() || slices_seen.insert(slice).second) ++units[group];
  }
  for (const auto& l : launching) {
    ++units[l.group];
    for (const auto& g : config.groups)
      if (g.name == l.group)
        for (auto& b : UnitBins(g, l.names.empty() ? "" : l.names[0])) bins.push_back(b);
  }
  std::map<std::string, ScaleUp> add;
  auto grow = [&](const GroupConfig& g, std::vector<Bin>& into) {
    ++units[g.name];
    std::string slice = g.name + "-new" + std::to_string(add[g.name].count);
    for (auto& b : UnitBins(g, slice)) into.push_back(b);
    add[g.name].group = g.name;
    ++add[g.name].count;
  };
  for (const auto& g : config.groups) {
    while (units[g.name] < g.min) {
      grow(g, bins);
      add[g.name].reason = "min " + std::to_string(g.min);
    }
  }
  for (const auto& d : demands) {
    if (d.bundles.empty() || PlaceOn(d, bins)) continue;
    bool placed = false, any_group = false;
    for (const auto& g : config.groups) {
      if (!GroupCanHold(g, d)) continue;
      any_group = true;
      std::vector<Bin> trial = bins;
      std::map<std::string, ScaleUp> saved_add = add;
      std::map<std::string, int> saved_units = units;
      while (units[g.name] < g.max) {
        grow(g, trial);
        if ((placed = PlaceOn(d, trial))) break;
      }
      if (placed) {
        bins = std::move(trial);
        std::string& why = add[g.name].reason;
        if (why.size() < 300) why += (why.empty() ? "for " : ", ") + Describe(d);
        break;
      }
      add = std::move(saved_add);
      units = std::move(saved_units);
    }
    if (!any_group) plan.unsatisfiable.push_back(Describe(d));
  }
  for (auto& [name, s] : add)
    if (s.count > 0) plan.add.push_back(std::move(s));
  return plan;
}

std::vector<ScaleDown> PlanScaleDown(const Config& config,
                                     const std::vector<proto::AutoscalerNodeMsg>& nodes,
                                     const std::vector<Launching>& launching) {
  std::vector<ScaleDown> out;
  for (const auto& g : config.groups) {
    // The group's units (a node, or a slice's hosts), by ordinal, highest first.
    std::map<int, ScaleDown, std::greater<int>> by_ordinal;
    std::map<int, double> idle;  // ordinal -> the least idle time among its hosts
    for (const auto& n : nodes) {
      if (LabelValue(n.labels, kGroupLabel) != g.name) continue;
      std::string slice = LabelValue(n.labels, kTpuSliceNameLabel);
      std::string name = LabelValue(n.labels, kNodeLabel);
      int ord = Ordinal(g.is_tpu ? slice : name);
      ScaleDown& s = by_ordinal[ord];
      s.group = g.name;
      s.slice = g.is_tpu ? slice : "";
      s.node_ids.push_back(n.node_id);
      s.names.push_back(name);
      auto [it, added] = idle.emplace(ord, n.idle_s);
      if (!added) it->second = std::min(it->second, n.idle_s);
    }
    int count = int(by_ordinal.size());
    for (const auto& l : launching) count += l.group == g.name;
    for (auto& [ord, s] : by_ordinal) {
      if (count <= g.min || ord < 0) break;
      if (g.is_tpu && int(s.node_ids.size()) != g.hosts()) break;  // a slice not all up yet
      if (idle[ord] < g.idle_timeout_s || idle[ord] <= 0) break;
      char why[128];
      std::snprintf(why, sizeof(why), "idle for %.0f s (idle_timeout_s %.0f)", idle[ord],
                    g.idle_timeout_s);
      s.reason = why;
      out.push_back(std::move(s));
      --count;
    }
  }
  return out;
}

}  // namespace orrery::autoscaler
