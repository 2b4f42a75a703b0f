// Every validation rule and derived default of docs/train.md "Configs", checked on
// ResolveConfig (no processes).
#include "orrery/train/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "orrery/errors.h"
#include "tpu_slice_config.h"

namespace orrery::train {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(const ScalingConfig& s, const TorchConfig& t = {}) {
  try {
    ResolveConfig(s, t);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(TrainConfig, DesignExampleResolvesToAV4SliceOfTwoHosts) {
  ResolvedConfig r = ResolveConfig(V4Slice(), TorchConfig{});
  EXPECT_EQ(r.backend, "xla_tpu");
  EXPECT_EQ(r.device, "xla");
  EXPECT_EQ(r.pod_type, "v4-16");
  EXPECT_EQ(r.hosts_per_slice, 2);
  EXPECT_EQ(r.chips_per_host, 4);
  EXPECT_EQ(r.num_slices, 1);
  EXPECT_EQ(r.mesh_shape, (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(r.model_parallel_size, 2);
  EXPECT_EQ(r.data_parallel_size, 4);
}

TEST(TrainConfig, TwoSlicesGetALeadingSliceAxis) {
  ResolvedConfig r = ResolveConfig(V4Slice(4), TorchConfig{});
  EXPECT_EQ(r.num_slices, 2);
  EXPECT_EQ(r.mesh_shape, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(r.data_parallel_size * r.model_parallel_size, 16);
}

TEST(TrainConfig, TpuChipsPerWorkerDefaultToTheHostsChips) {
  ScalingConfig s = V4Slice();
  s.resources_per_worker.clear();
  EXPECT_EQ(ResolveConfig(s, TorchConfig{}).resources_per_worker.at("TPU"), 4);
}

TEST(TrainConfig, TwoDimensionalTopologyForV4IsAcceptedWithAWarning) {
  ScalingConfig s{
      .num_workers = 1, .use_tpu = true, .topology = "2x2", .accelerator_type = "TPU-V4"};
  ResolvedConfig r = ResolveConfig(s, TorchConfig{});
  EXPECT_EQ(r.pod_type, "v4-8");
  EXPECT_FALSE(r.warnings.empty());
}

TEST(TrainConfig, CpuAndGpuDefaultsAndBackends) {
  ResolvedConfig cpu = ResolveConfig(ScalingConfig{.num_workers = 4}, TorchConfig{});
  EXPECT_EQ(cpu.backend, "gloo");
  EXPECT_EQ(cpu.device, "cpu");
  EXPECT_EQ(cpu.resources_per_worker.at("CPU"), 1);
  ResolvedConfig gpu =
      ResolveConfig(ScalingConfig{.num_workers = 2, .use_gpu = true}, TorchConfig{});
  EXPECT_EQ(gpu.backend, "nccl");
  EXPECT_EQ(gpu.resources_per_worker.at("GPU"), 1);
  EXPECT_EQ(ResolveConfig(ScalingConfig{.num_workers = 2, .use_gpu = true},
                          TorchConfig{.backend = "gloo"})
                .backend,
            "gloo");
}

TEST(TrainConfigValidation, GpuAndTpuTogether) {
  ScalingConfig s = V4Slice();
  s.use_gpu = true;
  EXPECT_THAT(ErrorOf(s), HasSubstr("use_gpu and use_tpu"));
}

TEST(TrainConfigValidation, TpuResourcesWithoutUseTpu) {
  EXPECT_THAT(ErrorOf(ScalingConfig{.num_workers = 1, .resources_per_worker = {{"TPU", 4}}}),
              HasSubstr("use_tpu = true"));
}

TEST(TrainConfigValidation, UseTpuWithZeroChips) {
  ScalingConfig s = V4Slice();
  s.resources_per_worker = {{"TPU", 0}};
  EXPECT_FALSE(ErrorOf(s).empty());
}

TEST(TrainConfigValidation, SeveralTpuWorkersNeedTopologyAndAcceleratorType) {
  ScalingConfig s = V4Slice();
  s.topology.clear();
  EXPECT_THAT(ErrorOf(s), HasSubstr("needs topology and accelerator_type"));
  s = V4Slice();
  s.accelerator_type.clear();
  EXPECT_THAT(ErrorOf(s), HasSubstr("needs topology and accelerator_type"));
}

TEST(TrainConfigValidation, MalformedOrInvalidTopology) {
  for (const char* bad : {"2x", "abc", "0x2x2", "2x2x2x2", "3x3x3"}) {
    ScalingConfig s = V4Slice();
    s.topology = bad;
    EXPECT_THAT(ErrorOf(s), HasSubstr("topology")) << bad;
  }
  ScalingConfig v6e{
      .num_workers = 1, .use_tpu = true, .topology = "2x2x2", .accelerator_type = "TPU-V6E"};
  EXPECT_THAT(ErrorOf(v6e), HasSubstr("topology"));
}

TEST(TrainConfigValidation, TpuAmountNotHeldByOneProcess) {
  for (double chips : {3.0, 16.0, 1.5}) {
    ScalingConfig s = V4Slice();
    s.resources_per_worker = {{"TPU", chips}};
    EXPECT_FALSE(ErrorOf(s).empty()) << chips;
  }
}

TEST(TrainConfigValidation, WorkersNotAMultipleOfHostsPerSlice) {
  EXPECT_THAT(ErrorOf(V4Slice(3)), HasSubstr("not a multiple of the 2 hosts"));
}

TEST(TrainConfigValidation, MeshThatDoesNotMatchTheDeviceCount) {
  TorchConfig t;
  t.xla_spmd_config.mesh_shape = {4, 4};
  EXPECT_THAT(ErrorOf(V4Slice(), t), HasSubstr("mesh_shape 4x4"));
  TorchConfig dpmp;
  dpmp.xla_spmd_config.data_parallel_size = 3;
  dpmp.xla_spmd_config.model_parallel_size = 2;
  EXPECT_THAT(ErrorOf(V4Slice(), dpmp), HasSubstr("data_parallel_size 3 x model_parallel_size 2"));
  TorchConfig good;
  good.xla_spmd_config.mesh_shape = {4, 2};
  ResolvedConfig r = ResolveConfig(V4Slice(), good);
  EXPECT_EQ(r.model_parallel_size, 2);
  EXPECT_EQ(r.data_parallel_size, 4);
}

TEST(TrainConfigValidation, LabelSelectorWithUseTpu) {
  ScalingConfig s = V4Slice();
  s.label_selector = {{"zone", "a"}};
  EXPECT_THAT(ErrorOf(s), HasSubstr("label_selector"));
}

TEST(TrainConfigValidation, BasicRules) {
  EXPECT_THAT(ErrorOf(ScalingConfig{.num_workers = 0}), HasSubstr("num_workers"));
  EXPECT_THAT(ErrorOf(ScalingConfig{.num_workers = 1, .placement_strategy = "RANDOM"}),
              HasSubstr("placement_strategy"));
  EXPECT_THAT(ErrorOf(ScalingConfig{}, TorchConfig{.backend = "mpi"}), HasSubstr("backend"));
  EXPECT_THAT(ErrorOf(ScalingConfig{}, TorchConfig{.backend = "nccl"}), HasSubstr("use_gpu"));
  EXPECT_THAT(ErrorOf(ScalingConfig{}, TorchConfig{.backend = "xla_tpu"}), HasSubstr("use_tpu"));
  EXPECT_THAT(ErrorOf(V4Slice(), TorchConfig{.backend = "gloo"}), HasSubstr("xla_tpu"));
  EXPECT_THAT(ErrorOf(ScalingConfig{.num_workers = 1, .resources_per_worker = {{"CPU", 1.5}}}),
              HasSubstr("whole"));
  TorchConfig spmd_on_cpu;
  spmd_on_cpu.xla_spmd_config.mesh_shape = {2};
  EXPECT_THAT(ErrorOf(ScalingConfig{.num_workers = 2}, spmd_on_cpu), HasSubstr("use_tpu"));
}

}  // namespace
}  // namespace orrery::train
