// train_linear: data-parallel SGD with Orrery Train, no libtorch. Each worker fits a linear
// model to its own shard of synthetic data; the gradients are averaged with AllReduce every
// step, so every worker holds the same weights. The loss falls; a checkpoint every 10 steps.
//
//   ./train_linear                          # 4 CPU workers on the embedded cluster
//   ./train_linear --orrery-address=127.0.0.1:6380 # on a cluster (orrery start --head prints it)
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "orrery/train/train.h"

namespace {

constexpr int kFeatures = 8;

// y = x . w_true + noise, 256 rows per worker, different rows on each.
void MakeShard(int rank, std::vector<std::vector<double>>* x, std::vector<double>* y) {
  std::mt19937 rng(1234 + rank);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int i = 0; i < 256; ++i) {
    std::vector<double> row(kFeatures);
    double target = 0;
    for (int f = 0; f < kFeatures; ++f) {
      row[f] = normal(rng);
      target += row[f] * (f + 1) * 0.5;  // w_true = 0.5, 1.0, 1.5, ...
    }
    x->push_back(row);
    y->push_back(target + 0.01 * normal(rng));
  }
}

}  // namespace

void TrainLinear(orrery::train::Context& ctx) {
  const int steps = ctx.Config().value("steps", 60);
  const double lr = ctx.Config().value("lr", 0.1);
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  MakeShard(ctx.WorldRank(), &x, &y);

  std::vector<double> w(kFeatures, 0.0);
  int start = 0;
  if (auto ckpt = ctx.GetCheckpoint()) {  // resuming after a restart
    std::ifstream in(ckpt->Path() + "/weights.txt");
    in >> start;
    for (double& v : w) in >> v;
  }
  for (int step = start + 1; step <= steps; ++step) {
    std::vector<double> grad(kFeatures, 0.0);
    double loss = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      double err = -y[i];
      for (int f = 0; f < kFeatures; ++f) err += w[f] * x[i][f];
      loss += err * err / double(x.size());
      for (int f = 0; f < kFeatures; ++f) grad[f] += 2 * err * x[i][f] / double(x.size());
    }
    ctx.AllReduce(grad, orrery::train::ReduceOp::kAvg);
    std::vector<double> total_loss{loss};
    ctx.AllReduce(total_loss, orrery::train::ReduceOp::kAvg);
    for (int f = 0; f < kFeatures; ++f) w[f] -= lr * grad[f];

    orrery::train::Metrics metrics{{"step", step}, {"loss", total_loss[0]}};
    if (step % 10 == 0 || step == steps) {
      // Rank 0 writes the checkpoint; the others report the same step without one.
      if (ctx.WorldRank() == 0) {
        std::string dir = ctx.RunPath() + "/tmp_rank0";
        std::filesystem::create_directories(dir);
        std::ofstream out(dir + "/weights.txt");
        out << step;
        for (double v : w) out << ' ' << v;
        out.close();
        ctx.Report(metrics, orrery::train::Checkpoint(dir));
      } else {
        ctx.Report(metrics);
      }
    } else {
      ctx.Report(metrics);
    }
  }
  // Every worker must end with the same weights.
  std::vector<double> all = ctx.AllGather(w);
  for (int r = 1; r < ctx.WorldSize(); ++r) {
    for (int f = 0; f < kFeatures; ++f) {
      if (all[size_t(r * kFeatures + f)] != all[size_t(f)])
        throw std::runtime_error("the workers' weights differ");
    }
  }
}
ORRERY_REMOTE(TrainLinear);

int main(int argc, char** argv) {
  // The embedded node offers 4 CPUs whatever the machine has (a cluster's nodes offer
  // their own), so the 4 workers, one CPU each, fit.
  orrery::Config config;
  config.num_cpus = 4;
  orrery::Init(config, argc, argv);
  orrery::train::ScalingConfig scaling;
  scaling.num_workers = 4;
  orrery::train::RunConfig run;
  run.name = "train_linear";
  // One directory per program run, so two runs at once never share checkpoints.
  run.storage_path =
      (std::filesystem::temp_directory_path() / "orrery_runs" / std::to_string(getpid())).string();
  run.checkpoint_config.num_to_keep = 2;
  run.checkpoint_config.score_attribute = "loss";
  run.checkpoint_config.order = "min";
  orrery::train::TorchTrainer trainer(TrainLinear, scaling, run, {}, {{"steps", 60}, {"lr", 0.1}});
  orrery::train::Result result = trainer.Fit();
  if (result.error) {
    std::printf("training failed: %s\n", result.error->what());
    orrery::Shutdown();
    return 1;
  }
  double first = result.metrics_history.front().at("loss"), last = result.metrics.at("loss");
  std::printf("loss %.4f -> %.6f over %zu steps; checkpoint %s\n", first, last,
              result.metrics_history.size(),
              result.checkpoint ? result.checkpoint->Path().c_str() : "(none)");
  bool ok =
      last < first / 100 && result.metrics_history.size() == 60 && result.checkpoint.has_value();
  std::printf("%s\n",
              ok ? "ok: the loss fell and every worker ended with the same weights" : "FAIL");
  orrery::Shutdown();
  return ok ? 0 : 1;
}
