#include "scheduler/src/util.h"

#include "core/internal/labels.h"

namespace orrery::scheduler {

bool MatchesSelector(const Labels& labels, const Labels& selector) {
  return orrery::MatchesSelector(labels, selector);
}

double Utilisation(const NodeView& node, const Resources& demand) {
  double u = 0;
  for (const auto& [name, amount] : demand) {
    auto t = node.total.find(name);
    if (t == node.total.end() || t->second <= 0) continue;
    auto a = node.available.find(name);
    double avail = a == node.available.end() ? 0 : a->second;
    u = std::max(u, 1.0 - avail / t->second);
  }
  return u;
}

bool Eligible(const NodeView& node, const Labels& selector) {
  return node.alive && MatchesSelector(node.labels, selector);
}

std::string InfeasibleReason(const Resources& demand, const Labels& selector,
                             const NodeList& view) {
  const NodeView* largest = nullptr;
  double best = -1;
  for (size_t i = 0; i < view.size(); ++i) {
    const NodeView& n = view[i];
    if (!n.alive) continue;
    double sum = 0;
    for (const auto& [name, amount] : demand) {
      auto it = n.total.find(name);
      if (it != n.total.end()) sum += std::min(it->second, amount);
    }
    if (sum > best) {
      best = sum;
      largest = &n;
    }
  }
  std::string out = "no alive node can ever hold the demand " + ToString(demand);
  if (!selector.empty()) out += " with labels " + ToString(selector);
  if (largest) {
    out += "; the largest node offers " + ToString(largest->total);
  } else {
    out += "; there are no alive nodes";
  }
  bool wants_tpu = false;
  for (const auto& [name, amount] : demand) wants_tpu = wants_tpu || name.rfind("TPU", 0) == 0;
  if (wants_tpu) {
    // The TPU inventory, so the user sees which slices exist.
    std::string inventory;
    for (size_t i = 0; i < view.size(); ++i) {
      const NodeView& n = view[i];
      auto chips = n.total.find("TPU");
      if (!n.alive || chips == n.total.end()) continue;
      auto label = [&](const char* k) {
        auto it = n.labels.find(k);
        return it == n.labels.end() ? std::string("?") : it->second;
      };
      inventory += (inventory.empty() ? "" : "; ") + n.id.Hex().substr(0, 12) + ": " +
                   std::to_string(int(chips->second)) + " chips of " + label(kTpuPodTypeLabel) +
                   " slice " + label(kTpuSliceNameLabel) + " worker " + label(kTpuWorkerIdLabel);
    }
    out += ". TPU inventory: " + (inventory.empty() ? std::string("no TPU hosts") : inventory);
  }
  return out;
}

}  // namespace orrery::scheduler
