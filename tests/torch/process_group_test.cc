// orrery/train/torch.h: the c10d process group and the device a training loop gets, on two
// real CPU workers (TorchTrainer, gloo backend), plus the contract's error cases in-process.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "orrery/train/torch.h"
#include "orrery/train/train.h"

namespace {

namespace ot = orrery::train_torch;

void Check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// Rank r contributes (r + 1) * (i + 1) at index i.
torch::Tensor Contribution(int rank, int n) {
  return torch::arange(1, n + 1, torch::kFloat64) * double(rank + 1);
}

}  // namespace

// Runs on every worker; throws (failing Fit) on the first broken expectation.
void ProcessGroupLoop(orrery::train::Context& ctx) {
  torch::set_num_threads(1);
  const int rank = ctx.WorldRank(), size = ctx.WorldSize();
  auto pg = ot::ProcessGroup(ctx);
  Check(pg->getRank() == rank,
        "pg rank " + std::to_string(pg->getRank()) + " != " + std::to_string(rank));
  Check(pg->getSize() == size,
        "pg size " + std::to_string(pg->getSize()) + " != " + std::to_string(size));
  Check(pg->getBackendName() == "gloo", "backend " + pg->getBackendName() + " on a CPU worker");
  Check(ot::ProcessGroup(ctx).get() == pg.get(), "a second call built a second group");
  Check(ot::TorchDevice(ctx) == torch::Device(torch::kCPU),
        "device " + ot::TorchDevice(ctx).str() + " for " + ctx.Device());

  // allreduce through c10d equals the serial sum of every rank's contribution.
  constexpr int kN = 1000;
  std::vector<torch::Tensor> t{Contribution(rank, kN)};
  pg->allreduce(t)->wait();
  torch::Tensor expected = torch::zeros({kN}, torch::kFloat64);
  for (int r = 0; r < size; ++r) expected += Contribution(r, kN);
  Check(torch::equal(t[0], expected), "allreduce differs from the serial sum");

  // BroadcastParameters: rank 0's weights everywhere; AllReduceGradients: the mean gradient.
  torch::manual_seed(rank);
  torch::nn::Linear net(4, 3);
  ot::BroadcastParameters(*net, *pg);
  std::vector<float> w(net->weight.data_ptr<float>(),
                       net->weight.data_ptr<float>() + net->weight.numel());
  std::vector<float> all_w = ctx.AllGather(w);
  for (size_t i = 0; i < all_w.size(); ++i)
    Check(all_w[i] == all_w[i % w.size()], "weights differ after broadcast");
  net->weight.mutable_grad() = torch::full({3, 4}, float(rank + 1));
  net->bias.mutable_grad() = torch::Tensor();  // no gradient yet: becomes zero
  ot::AllReduceGradients(*net, *pg);
  const float mean = float(size + 1) / 2;  // mean of 1..size
  Check(torch::allclose(net->weight.grad(), torch::full({3, 4}, mean)),
        "weight gradient is not the group mean");
  Check(net->bias.grad().defined() && net->bias.grad().abs().sum().item<float>() == 0,
        "bias gradient not zeroed");

  ctx.Report({{"pg_rank", pg->getRank()},
              {"pg_size", pg->getSize()},
              {"sum_last", t[0][kN - 1].item<double>()}});
}
ORRERY_REMOTE(ProcessGroupLoop);

TEST(TorchProcessGroupTest, TwoCpuWorkersShareOneGlooGroup) {
  orrery::Config config;
  config.num_cpus = 4;
  orrery::Init(config);
  orrery::train::ScalingConfig scaling;
  scaling.num_workers = 2;
  orrery::train::RunConfig run;
  run.name = "torch_process_group_test";
  run.storage_path = (std::filesystem::temp_directory_path() / "orrery_test_runs").string();
  run.verbose = 0;
  orrery::train::TorchConfig torch_config;
  torch_config.timeout_s = 120;
  orrery::train::Result result =
      orrery::train::TorchTrainer(ProcessGroupLoop, scaling, run, torch_config).Fit();
  orrery::Shutdown();
  ASSERT_EQ(result.error, nullptr) << result.error->what();
  ASSERT_EQ(result.metrics_history.size(), 1u);
  EXPECT_EQ(result.metrics.at("pg_rank"), 0);
  EXPECT_EQ(result.metrics.at("pg_size"), 2);
  EXPECT_EQ(result.metrics.at("sum_last"), 1000.0 * (1 + 2));
}

// A Context outside any trainer, for the in-process checks of the contract.
class FakeContext : public orrery::train::Context {
 public:
  FakeContext(std::string device, std::map<std::string, std::string> env)
      : device_(std::move(device)), env_(std::move(env)) {}
  int WorldRank() const override { return 0; }
  int WorldSize() const override { return 1; }
  int LocalRank() const override { return 0; }
  int LocalWorldSize() const override { return 1; }
  int NodeRank() const override { return 0; }
  const std::string& Device() const override { return device_; }
  const orrery::train::DeviceMesh& Mesh() const override { return mesh_; }
  const nlohmann::json& Config() const override { return config_; }
  const std::map<std::string, std::string>& Environment() const override { return env_; }
  const std::string& RunName() const override { return name_; }
  const std::string& RunPath() const override { return name_; }
  void Report(const orrery::train::Metrics&) override {}
  void Report(const orrery::train::Metrics&, const orrery::train::Checkpoint&) override {}
  std::optional<orrery::train::Checkpoint> GetCheckpoint() const override { return std::nullopt; }
  void Barrier() override {}

 protected:
  void AllReduceRaw(void*, size_t, int, orrery::train::ReduceOp) override {}
  void BroadcastRaw(void*, size_t, int) override {}
  std::vector<std::string> AllGatherRaw(const void*, size_t) override { return {}; }

 private:
  std::string device_, name_;
  std::map<std::string, std::string> env_;
  orrery::train::DeviceMesh mesh_;
  nlohmann::json config_;
};

TEST(TorchDeviceTest, MapsTheContextDevice) {
  EXPECT_EQ(ot::TorchDevice(FakeContext("cpu", {})), torch::Device(torch::kCPU));
  EXPECT_EQ(ot::TorchDevice(FakeContext("xla:0", {})),
            torch::Device(torch::kCPU));  // no torch_xla in C++
  EXPECT_THROW(ot::TorchDevice(FakeContext("tpu", {})), orrery::ConfigError);
  if (torch::cuda::is_available()) {
    EXPECT_EQ(ot::TorchDevice(FakeContext("cuda:0", {})), torch::Device(torch::kCUDA, 0));
  } else {
    EXPECT_THROW(ot::TorchDevice(FakeContext("cuda:0", {})), orrery::AcceleratorNotAvailableError);
  }
}

TEST(TorchProcessGroupTest, NeedsTheRendezvousVariables) {
  unsetenv("MASTER_ADDR");
  unsetenv("MASTER_PORT");
  EXPECT_THROW(ot::ProcessGroup(FakeContext("cpu", {})), orrery::ConfigError);
  EXPECT_THROW(
      ot::ProcessGroup(FakeContext("cpu", {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "x"}})),
      orrery::ConfigError);
  ot::ProcessGroupOptions options;
  options.backend = "mpi";
  EXPECT_THROW(
      ot::ProcessGroup(FakeContext("cpu", {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"}}),
                       options),
      orrery::ConfigError);
}
