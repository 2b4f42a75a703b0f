// AssignRanks and TpuMesh (train/src/backend.h) on made-up placements: rank order, the
// per-backend environment (gloo, nccl, xla_tpu with one and two slices) and the errors.
#include "train/src/backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "orrery/train/config.h"
#include "tpu_slice_config.h"

namespace orrery::train {
namespace {

using ::testing::HasSubstr;

WorkerPlacement Placement(int index, const std::string& node, const std::string& ip, int port = 0) {
  WorkerPlacement p;
  p.index = index;
  p.node_id = node;
  p.node_ip = ip;
  p.hostname = "host-" + node;
  p.free_port = port;
  return p;
}

WorkerPlacement TpuPlacement(int index, int slice, int worker_id, const std::string& ip) {
  WorkerPlacement p = Placement(index, "node-" + ip, ip, 40000 + index);
  p.slice = slice;
  p.node_labels = {{"orrery.io/tpu-worker-id", std::to_string(worker_id)},
                   {"orrery.io/tpu-slice-name", "slice-" + std::to_string(slice)}};
  p.accelerator_ids = {{"TPU", {0, 1, 2, 3}}};
  return p;
}

std::vector<WorkerAssignment> Assign(const ResolvedConfig& config,
                                     const std::vector<WorkerPlacement>& placements) {
  auto result = AssignRanks(config, placements);
  EXPECT_TRUE(result.ok()) << result.status().message();
  if (!result.ok()) return {};
  return result.value();
}

// The coordinates of device d in a row-major mesh of `shape`.
std::vector<int> RowMajor(int d, const std::vector<int>& shape) {
  std::vector<int> c(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    c[i] = d % shape[i];
    d /= shape[i];
  }
  return c;
}

bool HasMegascaleVar(const std::map<std::string, std::string>& env) {
  for (const auto& [k, v] : env)
    if (k.rfind("MEGASCALE_", 0) == 0) return true;
  return false;
}

TEST(AssignRanksGloo, InterleavedNodesGetContiguousRanksFirstNodeFirst) {
  ResolvedConfig config = ResolveConfig(ScalingConfig{.num_workers = 4}, TorchConfig{});
  ASSERT_EQ(config.backend, "gloo");
  // Bundle order A, B, A, B.
  std::vector<WorkerPlacement> placements{
      Placement(0, "A", "10.0.0.1", 29500), Placement(1, "B", "10.0.0.2", 29501),
      Placement(2, "A", "10.0.0.1", 29502), Placement(3, "B", "10.0.0.2", 29503)};
  auto a = Assign(config, placements);
  ASSERT_EQ(a.size(), 4u);
  const std::vector<int> index{0, 2, 1, 3}, local{0, 1, 0, 1}, node{0, 0, 1, 1};
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto& w = a[size_t(r)];
    EXPECT_EQ(w.rank, r);
    EXPECT_EQ(w.index, index[size_t(r)]);
    EXPECT_EQ(w.world_size, 4);
    EXPECT_EQ(w.local_rank, local[size_t(r)]);
    EXPECT_EQ(w.local_world_size, 2);
    EXPECT_EQ(w.node_rank, node[size_t(r)]);
    EXPECT_EQ(w.device, "cpu");
    EXPECT_EQ(w.env.at("RANK"), std::to_string(r));
    EXPECT_EQ(w.env.at("WORLD_SIZE"), "4");
    EXPECT_EQ(w.env.at("LOCAL_RANK"), std::to_string(local[size_t(r)]));
    EXPECT_EQ(w.env.at("LOCAL_WORLD_SIZE"), "2");
    EXPECT_EQ(w.env.at("NODE_RANK"), std::to_string(node[size_t(r)]));
    EXPECT_EQ(w.env.at("MASTER_ADDR"), "10.0.0.1");
    EXPECT_EQ(w.env.at("MASTER_PORT"), "29500");
    EXPECT_EQ(w.env.count("CUDA_VISIBLE_DEVICES"), 0u);
    EXPECT_EQ(w.env.count("PJRT_DEVICE"), 0u);
    EXPECT_EQ(w.mesh.shape, (std::vector<int>{4}));
    EXPECT_EQ(w.mesh.device_ids, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(w.mesh.local_device_ids, (std::vector<int>{r}));
  }
}

TEST(AssignRanksGloo, TheNodeThatAppearsFirstGetsRankZero) {
  ResolvedConfig config = ResolveConfig(ScalingConfig{.num_workers = 4}, TorchConfig{});
  std::vector<WorkerPlacement> placements{
      Placement(0, "B", "10.0.0.2", 1111), Placement(1, "A", "10.0.0.1", 2222),
      Placement(2, "A", "10.0.0.1", 3333), Placement(3, "B", "10.0.0.2", 4444)};
  auto a = Assign(config, placements);
  ASSERT_EQ(a.size(), 4u);
  std::vector<int> index;
  for (const auto& w : a) index.push_back(w.index);
  EXPECT_EQ(index, (std::vector<int>{0, 3, 1, 2}));
  EXPECT_EQ(a[0].env.at("MASTER_ADDR"), "10.0.0.2");
  EXPECT_EQ(a[3].env.at("MASTER_PORT"), "1111");
  EXPECT_EQ(a[2].node_rank, 1);
  EXPECT_EQ(a[2].local_rank, 0);
}

TEST(AssignRanks, NoPlacementsIsInvalid) {
  ResolvedConfig config = ResolveConfig(ScalingConfig{.num_workers = 1}, TorchConfig{});
  auto result = AssignRanks(config, {});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
}

TEST(AssignRanksNccl, WorkersOfANodeSeeAllItsGpusAndPickTheirOwn) {
  ResolvedConfig config =
      ResolveConfig(ScalingConfig{.num_workers = 2, .use_gpu = true}, TorchConfig{});
  ASSERT_EQ(config.backend, "nccl");
  WorkerPlacement p0 = Placement(0, "A", "10.0.0.1", 29500),
                  p1 = Placement(1, "A", "10.0.0.1", 29501);
  p0.accelerator_ids = {{"GPU", {1}}};
  p1.accelerator_ids = {{"GPU", {3}}};
  auto a = Assign(config, {p0, p1});
  ASSERT_EQ(a.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(a[size_t(r)].env.at("CUDA_VISIBLE_DEVICES"), "1,3") << r;
    EXPECT_EQ(a[size_t(r)].device, "cuda:" + std::to_string(r));
    EXPECT_EQ(a[size_t(r)].local_rank, r);
    EXPECT_EQ(a[size_t(r)].local_world_size, 2);
    EXPECT_EQ(a[size_t(r)].env.at("MASTER_PORT"), "29500");
    EXPECT_EQ(a[size_t(r)].mesh.shape, (std::vector<int>{2}));
  }
  // The other way round: rank 0 holds GPU 3, the second visible device.
  p0.accelerator_ids = {{"GPU", {3}}};
  p1.accelerator_ids = {{"GPU", {1}}};
  a = Assign(config, {p0, p1});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].env.at("CUDA_VISIBLE_DEVICES"), "1,3");
  EXPECT_EQ(a[0].device, "cuda:1");
  EXPECT_EQ(a[1].device, "cuda:0");
}

TEST(AssignRanksNccl, EachNodeListsOnlyItsOwnGpus) {
  ResolvedConfig config =
      ResolveConfig(ScalingConfig{.num_workers = 2, .use_gpu = true}, TorchConfig{});
  WorkerPlacement p0 = Placement(0, "A", "10.0.0.1"), p1 = Placement(1, "B", "10.0.0.2");
  p0.accelerator_ids = {{"GPU", {2}}};
  p1.accelerator_ids = {{"GPU", {0}}};
  auto a = Assign(config, {p0, p1});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].env.at("CUDA_VISIBLE_DEVICES"), "2");
  EXPECT_EQ(a[1].env.at("CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(a[0].device, "cuda:0");
  EXPECT_EQ(a[1].device, "cuda:0");
  EXPECT_EQ(a[1].node_rank, 1);
}

TEST(AssignRanksXlaTpu, OneV4Slice) {
  ResolvedConfig config = ResolveConfig(V4Slice(2), TorchConfig{});
  ASSERT_EQ(config.backend, "xla_tpu");
  // The first placement is TPU worker 1, the second worker 0 (the slice head).
  std::vector<WorkerPlacement> placements{TpuPlacement(0, 0, 1, "10.1.0.2"),
                                          TpuPlacement(1, 0, 0, "10.1.0.1")};
  auto a = Assign(config, placements);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].index, 1);
  EXPECT_EQ(a[1].index, 0);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto& w = a[size_t(r)];
    EXPECT_EQ(w.rank, r);
    EXPECT_EQ(w.env.at("PJRT_DEVICE"), "TPU");
    EXPECT_EQ(w.env.at("XLA_USE_SPMD"), "1");
    EXPECT_EQ(w.env.at("TPU_WORKER_ID"), std::to_string(r));
    EXPECT_EQ(w.env.at("TPU_WORKER_HOSTNAMES"), "10.1.0.1,10.1.0.2");
    EXPECT_EQ(w.env.at("XLA_MESH_SHAPE"), "2,2,2");
    EXPECT_EQ(w.env.at("RANK"), std::to_string(r));
    EXPECT_EQ(w.env.at("MASTER_ADDR"), "10.1.0.1");
    EXPECT_EQ(w.env.at("MASTER_PORT"), "40001");
    EXPECT_FALSE(HasMegascaleVar(w.env));
    EXPECT_EQ(w.device, "xla:0");
    EXPECT_EQ(w.node_rank, r);
    EXPECT_EQ(w.local_rank, 0);
    EXPECT_EQ(w.local_world_size, 1);
    EXPECT_EQ(w.mesh.shape, (std::vector<int>{2, 2, 2}));
    EXPECT_EQ(w.mesh.device_ids.size(), 8u);
    std::vector<int> local;
    std::vector<std::vector<int>> coords;
    for (int d = r * 4; d < r * 4 + 4; ++d) {
      local.push_back(d);
      coords.push_back(RowMajor(d, {2, 2, 2}));
    }
    EXPECT_EQ(w.mesh.local_device_ids, local);
    EXPECT_EQ(w.mesh.local_coordinates, coords);
  }
}

TEST(AssignRanksXlaTpu, TwoSlices) {
  ResolvedConfig config = ResolveConfig(V4Slice(4), TorchConfig{});
  ASSERT_EQ(config.num_slices, 2);
  std::vector<WorkerPlacement> placements{
      TpuPlacement(0, 0, 0, "10.0.0.1"), TpuPlacement(1, 0, 1, "10.0.0.2"),
      TpuPlacement(2, 1, 1, "10.0.1.2"), TpuPlacement(3, 1, 0, "10.0.1.1")};
  auto a = Assign(config, placements);
  ASSERT_EQ(a.size(), 4u);
  const std::vector<int> index{0, 1, 3, 2}, slice{0, 0, 1, 1}, worker_id{0, 1, 0, 1};
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto& w = a[size_t(r)];
    EXPECT_EQ(w.index, index[size_t(r)]);
    EXPECT_EQ(w.env.at("MEGASCALE_NUM_SLICES"), "2");
    EXPECT_EQ(w.env.at("MEGASCALE_SLICE_ID"), std::to_string(slice[size_t(r)]));
    EXPECT_EQ(w.env.at("MEGASCALE_COORDINATOR_ADDRESS"), "10.0.0.1");
    EXPECT_EQ(w.env.at("MEGASCALE_PORT"), "8081");
    EXPECT_EQ(w.env.at("TPU_WORKER_ID"), std::to_string(worker_id[size_t(r)]));
    EXPECT_EQ(w.env.at("TPU_WORKER_HOSTNAMES"),
              slice[size_t(r)] == 0 ? "10.0.0.1,10.0.0.2" : "10.0.1.1,10.0.1.2");
    EXPECT_EQ(w.env.at("XLA_MESH_SHAPE"), "2,2,2,2");
    EXPECT_EQ(w.env.at("WORLD_SIZE"), "4");
    EXPECT_EQ(w.mesh.shape, (std::vector<int>{2, 2, 2, 2}));
    EXPECT_EQ(w.mesh.local_device_ids, (std::vector<int>{r * 4, r * 4 + 1, r * 4 + 2, r * 4 + 3}));
  }
}

TEST(AssignRanksXlaTpu, PlacementWithoutWorkerIdIsInvalid) {
  ResolvedConfig config = ResolveConfig(V4Slice(2), TorchConfig{});
  std::vector<WorkerPlacement> placements{TpuPlacement(0, 0, 0, "10.1.0.1"),
                                          TpuPlacement(1, 0, 1, "10.1.0.2")};
  placements[1].node_labels.erase("orrery.io/tpu-worker-id");
  auto result = AssignRanks(config, placements);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("orrery.io/tpu-worker-id"));
  EXPECT_THAT(result.status().message(), HasSubstr("10.1.0.2"));
  placements[1].node_labels["orrery.io/tpu-worker-id"] = "one";
  EXPECT_FALSE(AssignRanks(config, placements).ok());
}

TEST(AssignRanksXlaTpu, TwoWorkersOnOneHostOfASliceIsInvalid) {
  ResolvedConfig config = ResolveConfig(V4Slice(2), TorchConfig{});
  std::vector<WorkerPlacement> placements{TpuPlacement(0, 0, 1, "10.1.0.2"),
                                          TpuPlacement(1, 0, 1, "10.1.0.2")};
  auto result = AssignRanks(config, placements);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  // The same worker id in two different slices is fine.
  ResolvedConfig two = ResolveConfig(V4Slice(4), TorchConfig{});
  std::vector<WorkerPlacement> ok{TpuPlacement(0, 0, 0, "a"), TpuPlacement(1, 0, 1, "b"),
                                  TpuPlacement(2, 1, 0, "c"), TpuPlacement(3, 1, 1, "d")};
  EXPECT_TRUE(AssignRanks(two, ok).ok());
}

TEST(TpuMesh, EachWorkerDrivesItsHostsChipsRowMajor) {
  ResolvedConfig config = ResolveConfig(V4Slice(2), TorchConfig{});
  for (int rank = 0; rank < 2; ++rank) {
    DeviceMesh m = TpuMesh(config, rank);
    EXPECT_EQ(m.shape, (std::vector<int>{2, 2, 2}));
    EXPECT_EQ(m.axis_names.size(), 3u);
    EXPECT_EQ(m.device_ids, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
    ASSERT_EQ(m.local_device_ids.size(), 4u);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(m.local_device_ids[size_t(i)], rank * 4 + i);
      EXPECT_EQ(m.local_coordinates[size_t(i)], RowMajor(rank * 4 + i, {2, 2, 2}));
    }
  }
  EXPECT_EQ(TpuMesh(config, 1).local_coordinates[3], (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(TpuMesh(config, 1).local_coordinates[1], (std::vector<int>{1, 0, 1}));
}

TEST(TpuMesh, AGivenMeshShapeIsUsed) {
  TorchConfig torch;
  torch.xla_spmd_config.mesh_shape = {4, 2};
  ResolvedConfig config = ResolveConfig(V4Slice(2), torch);
  DeviceMesh m = TpuMesh(config, 1);
  EXPECT_EQ(m.shape, (std::vector<int>{4, 2}));
  EXPECT_EQ(m.axis_names, (std::vector<std::string>{"data", "model"}));
  EXPECT_EQ(m.local_device_ids, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(m.local_coordinates, (std::vector<std::vector<int>>{{2, 0}, {2, 1}, {3, 0}, {3, 1}}));
}

TEST(TpuMesh, TwoSlicesHaveALeadingSliceAxis) {
  ResolvedConfig config = ResolveConfig(V4Slice(4), TorchConfig{});
  DeviceMesh m = TpuMesh(config, 3);
  EXPECT_EQ(m.shape, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(m.device_ids.size(), 16u);
  EXPECT_EQ(m.local_device_ids, (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(m.local_coordinates.front(), (std::vector<int>{1, 1, 0, 0}));
  EXPECT_EQ(m.local_coordinates.back(), (std::vector<int>{1, 1, 1, 1}));
}

}  // namespace
}  // namespace orrery::train
