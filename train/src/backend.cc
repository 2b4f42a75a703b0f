#include "train/src/backend.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "core/internal/labels.h"

namespace orrery::train {

namespace {

std::string JoinInts(const std::vector<int>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + std::to_string(v[i]);
  return out;
}

std::vector<std::string> AxisNames(size_t dims) {
  switch (dims) {
    case 1:
      return {"data"};
    case 2:
      return {"data", "model"};
    case 3:
      return {"x", "y", "z"};
    case 4:
      return {"slice", "x", "y", "z"};
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < dims; ++i) out.push_back("axis" + std::to_string(i));
  return out;
}

std::vector<int> Unravel(int id, const std::vector<int>& shape) {
  std::vector<int> coord(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    coord[i] = id % shape[i];
    id /= shape[i];
  }
  return coord;
}

int TpuWorkerId(const WorkerPlacement& p) {
  auto it = p.node_labels.find(kTpuWorkerIdLabel);
  if (it == p.node_labels.end()) return -1;
  try {
    return std::stoi(it->second);
  } catch (const std::exception&) {
    return -1;
  }
}

// Data-parallel mesh of one device per worker.
DeviceMesh FlatMesh(int world, int rank) {
  DeviceMesh m;
  m.shape = {world};
  m.axis_names = {"data"};
  m.device_ids.resize(size_t(world));
  std::iota(m.device_ids.begin(), m.device_ids.end(), 0);
  m.local_device_ids = {rank};
  m.local_coordinates = {{rank}};
  return m;
}

}  // namespace

DeviceMesh TpuMesh(const ResolvedConfig& config, int rank) {
  DeviceMesh m;
  m.shape = config.mesh_shape;
  m.axis_names = AxisNames(m.shape.size());
  int devices = std::accumulate(m.shape.begin(), m.shape.end(), 1, std::multiplies<int>());
  m.device_ids.resize(size_t(devices));
  std::iota(m.device_ids.begin(), m.device_ids.end(), 0);
  auto it = config.resources_per_worker.find("TPU");
  int chips = it == config.resources_per_worker.end() ? config.chips_per_host : int(it->second);
  for (int d = rank * chips; d < (rank + 1) * chips && d < devices; ++d) {
    m.local_device_ids.push_back(d);
    m.local_coordinates.push_back(Unravel(d, m.shape));
  }
  return m;
}

namespace {

// The placements' indices in rank order: TPU by (slice, worker id); otherwise by node of
// first appearance, then index.
orrery::Result<std::vector<int>> RankOrder(bool tpu,
                                           const std::vector<WorkerPlacement>& placements) {
  std::vector<int> order(placements.size());
  std::iota(order.begin(), order.end(), 0);
  std::map<std::string, int> node_first;
  for (const auto& p : placements) node_first.emplace(p.node_id, int(node_first.size()));
  if (tpu) {
    std::set<std::pair<int, int>> seen;
    for (const auto& p : placements) {
      int id = TpuWorkerId(p);
      if (id < 0) {
        return Status::InvalidArgument(
            "node " + p.node_id + " (" + p.node_ip +
            ") runs a TPU worker but has no orrery.io/tpu-worker-id label");
      }
      if (!seen.insert({p.slice, id}).second) {
        return Status::InvalidArgument("two workers of slice " + std::to_string(p.slice) +
                                       " landed on TPU host " + std::to_string(id) +
                                       "; xla_tpu runs one worker per host");
      }
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      const auto &pa = placements[size_t(a)], &pb = placements[size_t(b)];
      return std::make_pair(pa.slice, TpuWorkerId(pa)) < std::make_pair(pb.slice, TpuWorkerId(pb));
    });
  } else {
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return node_first[placements[size_t(a)].node_id] < node_first[placements[size_t(b)].node_id];
    });
  }
  return order;
}

// nccl, as Ray Train does it: every worker of a node sees all of the group's GPUs on that
// node (so NCCL can use peer-to-peer), and picks its own by local rank.
void SetNcclDevice(const std::vector<WorkerPlacement>& placements, const std::vector<int>& order,
                   const std::vector<int>& on_node, const WorkerPlacement& p, WorkerAssignment& a) {
  std::vector<int> gpus;
  for (int r : on_node) {
    const auto& q = placements[size_t(order[size_t(r)])];
    auto g = q.accelerator_ids.find("GPU");
    if (g != q.accelerator_ids.end()) gpus.insert(gpus.end(), g->second.begin(), g->second.end());
  }
  std::sort(gpus.begin(), gpus.end());
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  int device = 0;
  auto own = p.accelerator_ids.find("GPU");
  if (own != p.accelerator_ids.end() && !own->second.empty()) {
    device = int(std::find(gpus.begin(), gpus.end(), own->second.front()) - gpus.begin());
  }
  a.env["CUDA_VISIBLE_DEVICES"] = JoinInts(gpus, ",");
  a.device = "cuda:" + std::to_string(device);
  a.mesh = FlatMesh(a.world_size, a.rank);
}

// xla_tpu (docs/train.md "What Fit() does"): one process per host; the values are
// recomputed from the live group at every (re)start.
void SetTpuDevice(const ResolvedConfig& config, const std::vector<WorkerPlacement>& placements,
                  const std::vector<int>& order, const WorkerPlacement& master,
                  const WorkerPlacement& p, WorkerAssignment& a) {
  const int world = a.world_size, rank = a.rank;
  int hosts = config.hosts_per_slice > 0 ? config.hosts_per_slice : world;
  std::vector<std::string> slice_hosts;
  for (int r = (rank / hosts) * hosts; r < (rank / hosts + 1) * hosts && r < world; ++r) {
    slice_hosts.push_back(placements[size_t(order[size_t(r)])].node_ip);
  }
  std::string hostnames;
  for (const auto& h : slice_hosts) hostnames += (hostnames.empty() ? "" : ",") + h;
  auto& env = a.env;
  env["PJRT_DEVICE"] = "TPU";
  env["XLA_USE_SPMD"] = "1";
  env["TPU_WORKER_ID"] = std::to_string(TpuWorkerId(p));
  env["TPU_WORKER_HOSTNAMES"] = hostnames;
  env["XLA_MESH_SHAPE"] = JoinInts(config.mesh_shape, ",");
  env["XLA_DATA_PARALLEL_SIZE"] = std::to_string(config.data_parallel_size);
  env["XLA_MODEL_PARALLEL_SIZE"] = std::to_string(config.model_parallel_size);
  if (config.num_slices > 1) {
    env["MEGASCALE_COORDINATOR_ADDRESS"] = master.node_ip;
    env["MEGASCALE_PORT"] = std::to_string(kMegascalePort);
    env["MEGASCALE_NUM_SLICES"] = std::to_string(config.num_slices);
    env["MEGASCALE_SLICE_ID"] = std::to_string(p.slice);
  }
  a.device = "xla:0";
  a.mesh = TpuMesh(config, rank);
}

}  // namespace

orrery::Result<std::vector<WorkerAssignment>> AssignRanks(
    const ResolvedConfig& config, const std::vector<WorkerPlacement>& placements) {
  const bool tpu = config.backend == "xla_tpu";
  const int world = int(placements.size());
  if (world == 0) return Status::InvalidArgument("no workers to assign ranks to");
  auto ordered = RankOrder(tpu, placements);
  if (!ordered.ok()) return ordered.status();
  const std::vector<int>& order = ordered.value();

  // Node ranks in rank order, and each node's workers.
  std::map<std::string, int> node_rank;
  std::map<std::string, std::vector<int>> node_ranks;  // node -> ranks on it
  for (int rank = 0; rank < world; ++rank) {
    const auto& p = placements[size_t(order[size_t(rank)])];
    node_rank.emplace(p.node_id, int(node_rank.size()));
    node_ranks[p.node_id].push_back(rank);
  }

  const auto& master = placements[size_t(order[0])];
  std::vector<WorkerAssignment> out(static_cast<size_t>(world));
  for (int rank = 0; rank < world; ++rank) {
    const auto& p = placements[size_t(order[size_t(rank)])];
    auto& a = out[size_t(rank)];
    const auto& on_node = node_ranks[p.node_id];
    a.index = p.index;
    a.rank = rank;
    a.world_size = world;
    a.local_rank = int(std::find(on_node.begin(), on_node.end(), rank) - on_node.begin());
    a.local_world_size = int(on_node.size());
    a.node_rank = node_rank[p.node_id];
    auto& env = a.env;
    env["MASTER_ADDR"] = master.node_ip;
    env["MASTER_PORT"] = std::to_string(master.free_port);
    env["RANK"] = std::to_string(rank);
    env["WORLD_SIZE"] = std::to_string(world);
    env["LOCAL_RANK"] = std::to_string(a.local_rank);
    env["LOCAL_WORLD_SIZE"] = std::to_string(a.local_world_size);
    env["NODE_RANK"] = std::to_string(a.node_rank);
    env["ORRERY_TRAIN_BACKEND"] = config.backend;
    if (config.backend == "nccl") {
      SetNcclDevice(placements, order, on_node, p, a);
    } else if (tpu) {
      SetTpuDevice(config, placements, order, master, p, a);
    } else {
      a.device = "cpu";
      a.mesh = FlatMesh(world, rank);
    }
  }
  return out;
}

}  // namespace orrery::train
