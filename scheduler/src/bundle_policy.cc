// Placement-group bundle placement: all bundles at once or none (docs/architecture.md "The head").
#include <map>
#include <optional>

#include "scheduler/src/util.h"

namespace orrery::scheduler {

namespace {

using Avail = std::vector<Resources>;  // per candidate node

bool StrictSpreadDfs(const std::vector<Resources>& bundles, size_t b, Avail& avail,
                     std::vector<bool>& used, std::vector<int>& out) {
  if (b == bundles.size()) return true;
  for (size_t i = 0; i < avail.size(); ++i) {
    if (used[i] || !Fits(bundles[b], avail[i])) continue;
    used[i] = true;
    out[b] = int(i);
    if (StrictSpreadDfs(bundles, b + 1, avail, used, out)) return true;
    used[i] = false;
  }
  return false;
}

// Places bundles on the candidate nodes given their (simulated) available resources.
// Returns candidate indices per bundle.
std::optional<std::vector<int>> Try(const std::vector<Resources>& bundles,
                                    PlacementStrategy strategy, Avail avail) {
  std::vector<int> out(bundles.size(), -1);
  Resources sum;
  for (const auto& b : bundles) Add(sum, b);
  auto strict_pack = [&]() -> bool {
    for (size_t i = 0; i < avail.size(); ++i) {
      if (Fits(sum, avail[i])) {
        std::fill(out.begin(), out.end(), int(i));
        return true;
      }
    }
    return false;
  };
  switch (strategy) {
    case PlacementStrategy::STRICT_PACK:
      if (strict_pack()) return out;
      return std::nullopt;
    case PlacementStrategy::PACK: {
      if (strict_pack()) return out;
      std::vector<bool> used(avail.size(), false);
      for (size_t b = 0; b < bundles.size(); ++b) {
        int pick = -1;
        for (size_t i = 0; i < avail.size() && pick < 0; ++i)
          if (used[i] && Fits(bundles[b], avail[i])) pick = int(i);
        for (size_t i = 0; i < avail.size() && pick < 0; ++i)
          if (Fits(bundles[b], avail[i])) pick = int(i);
        if (pick < 0) return std::nullopt;
        used[pick] = true;
        Subtract(avail[pick], bundles[b]);
        out[b] = pick;
      }
      return out;
    }
    case PlacementStrategy::STRICT_SPREAD: {
      std::vector<bool> used(avail.size(), false);
      if (StrictSpreadDfs(bundles, 0, avail, used, out)) return out;
      return std::nullopt;
    }
    case PlacementStrategy::SPREAD: {
      std::vector<int> count(avail.size(), 0);
      for (size_t b = 0; b < bundles.size(); ++b) {
        int pick = -1;
        for (size_t i = 0; i < avail.size(); ++i) {
          if (!Fits(bundles[b], avail[i])) continue;
          if (pick < 0 || count[i] < count[pick]) pick = int(i);
        }
        if (pick < 0) return std::nullopt;
        ++count[pick];
        Subtract(avail[pick], bundles[b]);
        out[b] = pick;
      }
      return out;
    }
  }
  return std::nullopt;
}

}  // namespace

BundleDecision PlaceBundlesOn(const std::vector<Resources>& bundles, PlacementStrategy strategy,
                              const NodeList& view, const std::string& same_label,
                              const Labels& selector) {
  if (bundles.empty())
    return {Outcome::kInfeasible, {}, "a placement group needs at least one bundle"};
  // Candidate groups: all eligible nodes, or one group per value of same_label.
  std::map<std::string, std::vector<int>> groups;
  for (size_t i = 0; i < view.size(); ++i) {
    if (!Eligible(view[i], selector)) continue;
    if (same_label.empty()) {
      groups[""].push_back(int(i));
    } else {
      auto it = view[i].labels.find(same_label);
      if (it != view[i].labels.end()) groups[it->second].push_back(int(i));
    }
  }
  bool feasible = false;
  for (const auto& [value, nodes] : groups) {
    Avail total, avail;
    for (int i : nodes) {
      total.push_back(view[i].total);
      avail.push_back(view[i].suspected ? Resources{} : view[i].available);
    }
    if (!Try(bundles, strategy, total)) continue;
    feasible = true;
    if (auto placed = Try(bundles, strategy, avail)) {
      BundleDecision d{Outcome::kPlaced, {}, ""};
      for (int c : *placed) d.node_of_bundle.push_back(nodes[c]);
      return d;
    }
  }
  std::string what =
      std::to_string(bundles.size()) + " bundle(s) with " + PlacementStrategyName(strategy);
  if (!same_label.empty()) what += " on nodes sharing one '" + same_label + "'";
  if (!feasible) {
    Resources largest;
    for (const auto& b : bundles)
      for (const auto& [k, v] : b) largest[k] = std::max(largest[k], v);
    return {
        Outcome::kInfeasible,
        {},
        "the cluster can never hold " + what + "; " + InfeasibleReason(largest, selector, view)};
  }
  return {Outcome::kWait, {}, "waiting for resources to place " + what};
}

}  // namespace orrery::scheduler
