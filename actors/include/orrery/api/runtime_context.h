// What the running process knows about itself: inside an actor or task, the node it runs
// on and the accelerator devices its node gave it.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace orrery {

struct RuntimeContext {
  bool is_worker = false;  // false in a driver
  std::string node_id;     // the node's id (32 hex); "" in a driver
  std::string worker_id;
  std::string node_ip;  // the address this process's node listens on; "" in a driver
  // Device ids this process owns, per kind ("TPU", "GPU", "XPU"): the node sets
  // TPU_VISIBLE_CHIPS / CUDA_VISIBLE_DEVICES / ZE_AFFINITY_MASK to them before the process
  // starts, and no other live process gets the same ids.
  std::map<std::string, std::vector<int>> accelerator_ids;

  const std::map<std::string, std::vector<int>>& GetAcceleratorIds() const {
    return accelerator_ids;
  }
  // Inside a task or actor method: whether its caller cancelled it (orrery::Cancel) while it
  // runs. A long call polls this and returns early; its result is TaskCancelledError then,
  // whatever it returns. False outside a call.
  bool IsCancelled() const;
};

RuntimeContext GetRuntimeContext();

}  // namespace orrery
