#include "node/src/device_allocator.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "orrery/tpu.h"

namespace orrery::node {

namespace {
constexpr const char* kKinds[] = {"TPU", "GPU", "XPU"};

std::string Join(const std::vector<int>& ids) {
  std::string list;
  for (int i : ids) list += (list.empty() ? "" : ",") + std::to_string(i);
  return list;
}
}  // namespace

DeviceAllocator::DeviceAllocator(const Resources& resources, const DeviceIds& ids)
    : resources_(resources), ids_(ids) {
  for (const char* kind : kKinds) {
    auto it = resources_.find(kind);
    if (it == resources_.end() || it->second < 1) continue;
    auto given = ids_.find(kind);
    if (given != ids_.end() && !given->second.empty()) {
      free_[kind] = given->second;
    } else {
      for (int i = 0; i < int(it->second); ++i) free_[kind].push_back(i);
    }
  }
}

Result<DeviceGrant> DeviceAllocator::Assign(const Resources& demand, const std::string& node_name) {
  DeviceGrant grant;
  DeviceIds taken;  // checked for every kind before anything is taken
  nlohmann::json ids_json = nlohmann::json::object();
  for (const char* kind : kKinds) {
    auto it = demand.find(kind);
    if (it == demand.end() || it->second <= 0) continue;
    const auto& free = free_[kind];
    int total = int(resources_.count(kind) ? resources_.at(kind) : 0);
    std::vector<int> ids;
    if (it->second < 1) {
      // A fraction shares one device with other fractional holders: not exclusive.
      auto all = ids_.count(kind) ? ids_.at(kind) : std::vector<int>{0};
      ids.push_back(free.empty() ? all.front() : free.front());
    } else {
      int n = int(it->second);
      if (std::string(kind) == "TPU") {
        Status s = tpu::ValidateChipsPerProcess(n, total);
        if (!s.ok())
          return Status::InvalidArgument("a worker cannot take " + std::to_string(n) +
                                         " TPU chips: " + s.message());
      }
      if (int(free.size()) < n) {
        return Status::Unavailable("node " + node_name + " has " + std::to_string(free.size()) +
                                   " free " + kind + " device(s), the worker needs " +
                                   std::to_string(n));
      }
      ids.assign(free.begin(), free.begin() + n);
      taken[kind] = ids;
    }
    if (std::string(kind) == "TPU") {
      for (const auto& [k, v] : tpu::VisibleChipsEnv(ids, total)) grant.env[k] = v;
    } else if (std::string(kind) == "GPU") {
      grant.env["CUDA_VISIBLE_DEVICES"] = Join(ids);
    } else {
      grant.env["ZE_AFFINITY_MASK"] = Join(ids);
    }
    ids_json[kind] = ids;
  }
  grant.env["ORRERY_ACCELERATOR_IDS"] = ids_json.dump();
  for (const auto& [kind, ids] : taken) {
    auto& free = free_[kind];
    free.erase(free.begin(), free.begin() + long(ids.size()));
  }
  grant.devices = std::move(taken);
  return grant;
}

void DeviceAllocator::Release(const DeviceIds& devices) {
  for (const auto& [kind, ids] : devices) {
    auto& free = free_[kind];
    free.insert(free.end(), ids.begin(), ids.end());
    std::sort(free.begin(), free.end());
  }
}

std::vector<int> DeviceAllocator::Free(const std::string& kind) const {
  auto it = free_.find(kind);
  return it == free_.end() ? std::vector<int>{} : it->second;
}

}  // namespace orrery::node
