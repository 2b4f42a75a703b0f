#include "train/src/reservation.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "core/internal/labels.h"
#include "orrery/resources.h"

namespace orrery::train {

namespace {

std::string ResourcesText(const Resources& r) {
  std::string out = "{";
  for (const auto& [k, v] : r) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", v);
    out += (out.size() > 1 ? ", \"" : "\"") + k + "\": " + buf;
  }
  return out + "}";
}

PlacementStrategy StrategyOf(const std::string& name) {
  if (name == "SPREAD") return PlacementStrategy::SPREAD;
  if (name == "STRICT_PACK") return PlacementStrategy::STRICT_PACK;
  if (name == "STRICT_SPREAD") return PlacementStrategy::STRICT_SPREAD;
  return PlacementStrategy::PACK;
}

}  // namespace

std::vector<NodeInfo> NodesThatMayCome(const std::vector<proto::AutoscalerGroupMsg>& groups) {
  std::vector<NodeInfo> out;
  for (const auto& g : groups) {
    int hosts = std::max(1, g.hosts);
    int nodes = std::min(g.max_nodes, 64 * hosts);
    for (int i = 0; i < nodes; ++i) {
      NodeInfo n;
      n.address = "(autoscaler group " + g.name + ")";
      n.alive = true;
      n.total = g.resources;
      n.labels = g.labels;
      if (hosts > 1 || !g.head_resources.empty()) {
        n.labels[kTpuSliceNameLabel] = g.name + "-" + std::to_string(i / hosts);
        n.address = "(autoscaler group " + g.name + ", host " + std::to_string(i % hosts) + ")";
        if (i % hosts == 0)
          for (const auto& [k, v] : g.head_resources) n.total[k] += v;
      }
      n.available = n.total;
      out.push_back(std::move(n));
    }
  }
  return out;
}

Status CheckFeasible(const ResolvedConfig& config, const ScalingConfig& scaling,
                     const std::vector<NodeInfo>& nodes, proto::ErrorKind* kind) {
  if (config.backend == "xla_tpu" && !config.pod_type.empty()) {
    std::string head = "TPU-" + config.pod_type + "-head";
    int heads = 0;
    std::map<std::string, std::set<std::string>> slices;  // "v4-16 slice-a" -> hosts
    for (const auto& n : nodes) {
      if (!n.alive) continue;
      auto it = n.total.find(head);
      if (it != n.total.end() && it->second > 0) ++heads;
      std::string slice = LabelValue(n.labels, kTpuSliceNameLabel);
      if (!slice.empty())
        slices[LabelValue(n.labels, kTpuPodTypeLabel) + " slice \"" + slice + "\""].insert(
            n.address);
    }
    if (heads >= config.num_slices) return Status::Ok();
    *kind = proto::ErrorKind::kAcceleratorNotAvailableError;
    std::string have;
    for (const auto& [s, hosts] : slices)
      have += (have.empty() ? "" : ", ") + s + " (" + std::to_string(hosts.size()) + " hosts)";
    if (have.empty()) have = "none";
    std::string want = std::to_string(config.num_slices) + " " + config.pod_type + " slice" +
                       (config.num_slices > 1 ? "s" : "");
    return Status::NotFound("the training group needs " + want + " (topology " + scaling.topology +
                            ", " + scaling.accelerator_type + "), but " + std::to_string(heads) +
                            " node(s) of the cluster offer " + head +
                            ". TPU slices in the cluster: " + have);
  }
  // How many workers the live nodes could hold at most, each node on its own.
  int capacity = 0;
  for (const auto& n : nodes) {
    bool labels_ok = n.alive;
    for (const auto& [k, v] : scaling.label_selector)
      labels_ok = labels_ok && LabelValue(n.labels, k) == v;
    if (!labels_ok) continue;
    int fit = config.num_workers;
    for (const auto& [name, need] : config.resources_per_worker) {
      if (need <= 0) continue;
      auto it = n.total.find(name);
      fit = std::min(fit, it == n.total.end() ? 0 : int(it->second / need + 1e-9));
    }
    if (scaling.placement_strategy == "STRICT_PACK") {
      capacity = std::max(capacity, fit);  // all on one node
    } else {
      capacity += scaling.placement_strategy == "STRICT_SPREAD" ? std::min(fit, 1) : fit;
    }
  }
  if (capacity >= config.num_workers) return Status::Ok();
  bool accel = config.resources_per_worker.count("GPU") || config.resources_per_worker.count("TPU");
  *kind =
      accel ? proto::ErrorKind::kAcceleratorNotAvailableError : proto::ErrorKind::kInfeasibleError;
  std::string have;
  for (const auto& n : nodes)
    if (n.alive) have += (have.empty() ? "" : "; ") + n.address + " " + ResourcesText(n.total);
  return Status::NotFound("the cluster can hold " + std::to_string(capacity) + " of the " +
                          std::to_string(config.num_workers) + " training workers (each " +
                          ResourcesText(config.resources_per_worker) +
                          (scaling.label_selector.empty() ? "" : ", with the label selector") +
                          ", " + scaling.placement_strategy +
                          ") even when idle. Nodes: " + (have.empty() ? "none alive" : have));
}

std::vector<PlacementGroupCreationOptions> GroupOptions(const ResolvedConfig& config,
                                                        const ScalingConfig& scaling,
                                                        const std::string& name_prefix) {
  std::vector<PlacementGroupCreationOptions> out;
  if (config.backend == "xla_tpu" && !config.pod_type.empty()) {
    for (int s = 0; s < config.num_slices; ++s) {
      PlacementGroupCreationOptions o;
      o.name = name_prefix + "-slice" + std::to_string(s);
      o.strategy = PlacementStrategy::STRICT_SPREAD;
      o.same_label = kTpuSliceNameLabel;
      for (int h = 0; h < config.hosts_per_slice; ++h) {
        Resources b = config.resources_per_worker;
        if (h == 0) b["TPU-" + config.pod_type + "-head"] = 1;
        o.bundles.push_back(b);
      }
      out.push_back(std::move(o));
    }
    return out;
  }
  PlacementGroupCreationOptions o;
  o.name = name_prefix;
  o.strategy = StrategyOf(scaling.placement_strategy);
  o.label_selector = scaling.label_selector;
  o.bundles.assign(size_t(config.num_workers), config.resources_per_worker);
  out.push_back(std::move(o));
  return out;
}

double ReservationTimeout(const RunConfig& run) {
  if (run.reservation_timeout_s >= 0) return run.reservation_timeout_s;
  const char* env = std::getenv("TRAIN_PLACEMENT_GROUP_TIMEOUT_S");
  if (env == nullptr || *env == '\0') return 100;
  char* end = nullptr;
  double v = std::strtod(env, &end);
  if (end == env || *end != '\0' || v < 0) {
    throw ConfigError(std::string("TRAIN_PLACEMENT_GROUP_TIMEOUT_S=\"") + env +
                      "\" is not a number of seconds >= 0");
  }
  return v;
}

}  // namespace orrery::train
