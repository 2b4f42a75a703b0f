#include "train/src/checkpoint_manager.h"

#include <algorithm>
#include <cstdio>

namespace orrery::train {

std::string CheckpointDirName(int64_t index) {
  char name[32];
  std::snprintf(name, sizeof(name), "checkpoint_%06lld", static_cast<long long>(index + 1));
  return name;
}

bool CheckpointManager::Better(const KeptCheckpoint& a, const KeptCheckpoint& b) const {
  if (!config_.score_attribute.empty()) {
    auto ia = a.metrics.find(config_.score_attribute), ib = b.metrics.find(config_.score_attribute);
    bool ha = ia != a.metrics.end(), hb = ib != b.metrics.end();
    if (ha != hb) return ha;  // a checkpoint without the score ranks last
    if (ha && ia->second != ib->second) {
      return config_.order == "min" ? ia->second < ib->second : ia->second > ib->second;
    }
  }
  return a.index > b.index;  // ties and no score: the newer one
}

std::vector<std::string> CheckpointManager::Register(KeptCheckpoint checkpoint) {
  kept_.push_back(std::move(checkpoint));
  std::vector<std::string> evicted;
  if (config_.num_to_keep <= 0) return evicted;
  int64_t latest = kept_.back().index;
  std::vector<KeptCheckpoint> ranked = kept_;
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](const auto& a, const auto& b) { return Better(a, b); });
  std::vector<KeptCheckpoint> keep;
  for (const auto& c : ranked) {
    bool in_best = int(keep.size()) < config_.num_to_keep;
    if (in_best || c.index == latest) {
      keep.push_back(c);
    } else if (c.path != kept_.back().path) {
      evicted.push_back(c.path);
    }
  }
  // kept_ stays in report order.
  std::sort(keep.begin(), keep.end(),
            [](const auto& a, const auto& b) { return a.index < b.index; });
  kept_ = std::move(keep);
  return evicted;
}

std::optional<KeptCheckpoint> CheckpointManager::Latest() const {
  if (kept_.empty()) return std::nullopt;
  return kept_.back();
}

std::vector<KeptCheckpoint> CheckpointManager::Kept() const {
  std::vector<KeptCheckpoint> out = kept_;
  std::stable_sort(out.begin(), out.end(),
                   [&](const auto& a, const auto& b) { return Better(a, b); });
  return out;
}

}  // namespace orrery::train
