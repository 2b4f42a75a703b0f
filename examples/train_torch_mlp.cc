// train_torch_mlp: a libtorch model trained data-parallel with Orrery Train. Two CPU workers
// each fit a small torch::nn MLP to their own shard of synthetic data; the gradients are
// averaged through the c10d (Gloo) process group that orrery/train/torch.h builds from the
// trainer's rendezvous, so every worker holds the same weights. The loss falls. Built only
// when libtorch is found (ORRERY_WITH_TORCH, Debian's libtorch-dev).
//
//   ./train_torch_mlp                                  # 2 CPU workers, embedded cluster
//   ./train_torch_mlp --orrery-address=127.0.0.1:6380  # on a cluster (orrery start prints it)
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "orrery/train/torch.h"
#include "orrery/train/train.h"

namespace {

namespace ot = orrery::train_torch;

constexpr int kFeatures = 8;
constexpr int kRows = 512;  // per worker

// y = sin(x . a) + 0.5 * x_0 * x_1 + noise: a different shard on each rank.
std::pair<torch::Tensor, torch::Tensor> MakeShard(int rank) {
  torch::manual_seed(1000 + rank);
  torch::Tensor x = torch::randn({kRows, kFeatures});
  torch::Tensor a = torch::linspace(-1.0, 1.0, kFeatures);
  torch::Tensor y = torch::sin(x.matmul(a)) + 0.5 * x.select(1, 0) * x.select(1, 1);
  y = y + 0.01 * torch::randn({kRows});
  return {x, y.unsqueeze(1)};
}

struct MlpImpl : torch::nn::Module {
  MlpImpl()
      : fc1(register_module("fc1", torch::nn::Linear(kFeatures, 64))),
        fc2(register_module("fc2", torch::nn::Linear(64, 64))),
        out(register_module("out", torch::nn::Linear(64, 1))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(fc1(x));
    x = torch::relu(fc2(x));
    return out(x);
  }
  torch::nn::Linear fc1, fc2, out;
};
TORCH_MODULE(Mlp);

}  // namespace

void TrainTorchMlp(orrery::train::Context& ctx) {
  torch::set_num_threads(1);  // one CPU per worker
  const int steps = ctx.Config().value("steps", 150);
  const double lr = ctx.Config().value("lr", 0.01);

  auto pg = ot::ProcessGroup(ctx);
  if (pg->getRank() != ctx.WorldRank() || pg->getSize() != ctx.WorldSize()) {
    throw std::runtime_error("the c10d group's rank/size differ from the context's");
  }
  torch::Device device = ot::TorchDevice(ctx);
  auto [x, y] = MakeShard(ctx.WorldRank());
  x = x.to(device);
  y = y.to(device);

  torch::manual_seed(ctx.WorldRank());  // different initial weights on each rank ...
  Mlp net;
  net->to(device);
  ot::BroadcastParameters(*net, *pg);  // ... until rank 0's are broadcast
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(lr));

  for (int step = 1; step <= steps; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = torch::mse_loss(net->forward(x), y);
    loss.backward();
    ot::AllReduceGradients(*net, *pg);
    optimizer.step();

    std::vector<torch::Tensor> mean_loss{loss.detach().clone()};
    pg->allreduce(mean_loss)->wait();
    ctx.Report({{"step", step}, {"loss", mean_loss[0].item<double>() / ctx.WorldSize()}});
  }

  // Every worker must end with the same weights, bit for bit.
  std::vector<torch::Tensor> parts;
  for (const auto& p : net->parameters()) parts.push_back(p.detach().reshape({-1}).to(torch::kCPU));
  torch::Tensor flat = torch::cat(parts).contiguous();
  std::vector<float> mine(flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
  std::vector<float> all = ctx.AllGather(mine);
  for (int r = 1; r < ctx.WorldSize(); ++r) {
    for (size_t i = 0; i < mine.size(); ++i) {
      if (all[size_t(r) * mine.size() + i] != all[i])
        throw std::runtime_error("the workers' weights differ");
    }
  }
}
ORRERY_REMOTE(TrainTorchMlp);

int main(int argc, char** argv) {
  // The embedded node offers 4 CPUs whatever the machine has, so the 2 workers fit.
  orrery::Config config;
  config.num_cpus = 4;
  orrery::Init(config, argc, argv);
  orrery::train::ScalingConfig scaling;
  scaling.num_workers = 2;
  orrery::train::RunConfig run;
  run.name = "train_torch_mlp";
  // One directory per program run, so two runs at once never share checkpoints.
  run.storage_path =
      (std::filesystem::temp_directory_path() / "orrery_runs" / std::to_string(getpid())).string();
  run.verbose = 0;
  orrery::train::TorchTrainer trainer(TrainTorchMlp, scaling, run, {},
                                      {{"steps", 150}, {"lr", 0.01}});
  orrery::train::Result result = trainer.Fit();
  if (result.error) {
    std::printf("training failed: %s\n", result.error->what());
    orrery::Shutdown();
    return 1;
  }
  double first = result.metrics_history.front().at("loss"), last = result.metrics.at("loss");
  std::printf("loss %.4f -> %.4f over %zu steps (2 workers, c10d gloo)\n", first, last,
              result.metrics_history.size());
  bool ok = last < first / 4 && result.metrics_history.size() == 150;
  std::printf("%s\n",
              ok ? "ok: the loss fell and every worker ended with the same weights" : "FAIL");
  orrery::Shutdown();
  return ok ? 0 : 1;
}
