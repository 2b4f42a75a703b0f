// The node's accelerator devices (docs/accelerators.md "Devices per worker process"): which
// TPU chips, GPUs and XPUs are free, given whole to a worker process for as long as it
// holds them, and the environment that makes exactly those visible to it.
//
// Not thread-safe: used on the node's inbox thread only.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "orrery/config.h"
#include "orrery/status.h"

namespace orrery::node {

// Device ids per kind ("TPU", "GPU", "XPU").
using DeviceIds = std::map<std::string, std::vector<int>>;

// What one worker process was given.
struct DeviceGrant {
  DeviceIds devices;                       // whole devices it owns (none for fractions)
  std::map<std::string, std::string> env;  // what makes them visible to it
};

class DeviceAllocator {
 public:
  // `resources`: the node's (how many of each kind it has); `ids`: the device ids per kind,
  // kinds with a resource but no entry get 0..n-1.
  DeviceAllocator(const Resources& resources, const DeviceIds& ids);

  // Takes whole devices for `demand` (TPU/GPU/XPU; a fraction shares one device and takes
  // none). InvalidArgument for a TPU amount a process cannot hold, Unavailable when the
  // devices are not free; nothing is taken then.
  [[nodiscard]] Result<DeviceGrant> Assign(const Resources& demand, const std::string& node_name);
  // Gives devices taken by Assign back.
  void Release(const DeviceIds& devices);

  // The free ids of `kind`, ascending.
  std::vector<int> Free(const std::string& kind) const;

 private:
  Resources resources_;
  DeviceIds ids_;
  DeviceIds free_;  // per kind, ascending
};

}  // namespace orrery::node
