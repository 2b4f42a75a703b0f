// Rank assignment and the per-worker environment of each backend (gloo, nccl, xla_tpu).
// Pure functions of where the workers landed: no I/O, unit-tested on made-up placements.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "orrery/config.h"
#include "orrery/status.h"
#include "orrery/train/config.h"
#include "orrery/train/context.h"

namespace orrery::train {

// Where worker `index` (its bundle index, counted over all slices) landed.
struct WorkerPlacement {
  int index = 0;
  int slice = 0;  // TPU: which reserved slice (0 ..); otherwise 0
  std::string node_id;
  std::string node_ip;
  std::string hostname;
  Labels node_labels;  // the node's labels (TPU: orrery.io/tpu-worker-id, slice name)
  std::map<std::string, std::vector<int>> accelerator_ids;  // what the node gave the worker
  int free_port = 0;  // a port the worker holds on its host (rank 0's becomes MASTER_PORT)
};

struct WorkerAssignment {
  int index = 0;  // into the placements
  int rank = 0;
  int world_size = 0;
  int local_rank = 0;
  int local_world_size = 0;
  int node_rank = 0;
  std::string device;                      // "cpu", "cuda:N", "xla:0"
  std::map<std::string, std::string> env;  // what the worker exports before the loop runs
  DeviceMesh mesh;
};

// Ranks: TPU workers by (slice, TPU worker id), so rank 0 is worker 0 of the first slice;
// otherwise nodes in the order their first worker appears (worker 0's node first) and the
// workers of a node contiguous. Returns the assignments in rank order, or InvalidArgument
// when the placements contradict the configuration (a TPU host without a worker id, two
// workers on one TPU host, ...).
orrery::Result<std::vector<WorkerAssignment>> AssignRanks(
    const ResolvedConfig& config, const std::vector<WorkerPlacement>& placements);

// The mesh a TPU group uses: mesh_shape over the slice's chips (times slices), device ids
// row-major; worker `rank` drives chips [rank * chips_per_host, (rank + 1) * chips_per_host).
DeviceMesh TpuMesh(const ResolvedConfig& config, int rank);

// Port of the coordinator of several TPU slices (MEGASCALE_PORT).
inline constexpr int kMegascalePort = 8081;

}  // namespace orrery::train
