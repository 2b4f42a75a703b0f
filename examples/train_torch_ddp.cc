// train_torch_ddp: a PyTorch DistributedDataParallel script (train_torch_ddp.py beside this
// file) run by Orrery Train as a framework process on every worker. The driver is C++; the
// training is Python. The loss falls, rank 0's checkpoints are kept, and with --kill a rank's
// process SIGKILLs itself mid-run: the group restarts from the latest checkpoint and the run
// ends at the same epoch.
//
//   ./train_torch_ddp                                 # 3 CPU workers (gloo), embedded cluster
//   ./train_torch_ddp --workers=2 --kill              # a rank killed once, one restart
//   ./train_torch_ddp --gpu --workers=1               # nccl, one worker per GPU
//   ./train_torch_ddp --orrery-address=127.0.0.1:6380 # on a cluster
// --python=P picks the interpreter (default: the first of /usr/bin/python3 and python3 on
// PATH that imports torch); exit 77 when none does (no python3-torch installed), 1 under CI.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "orrery/train/train.h"

namespace {

struct Args {
  int workers = 3;
  int epochs = 5;
  bool kill = false;
  bool gpu = false;
  std::string python;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--workers=", 0) == 0) a.workers = std::atoi(s.c_str() + 10);
    if (s.rfind("--epochs=", 0) == 0) a.epochs = std::atoi(s.c_str() + 9);
    if (s.rfind("--python=", 0) == 0) a.python = s.substr(9);
    if (s == "--kill") a.kill = true;
    if (s == "--gpu") a.gpu = true;
  }
  return a;
}

// The first interpreter that imports torch, "" when none does.
std::string FindPython(const std::string& given) {
  std::vector<std::string> candidates{"/usr/bin/python3", "python3"};
  if (!given.empty()) candidates = {given};
  for (const auto& p : candidates) {
    std::string probe = p + " -c 'import torch' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return p;
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  Args args = Parse(argc, argv);
  std::string python = FindPython(args.python);
  if (python.empty()) {
    std::printf("train_torch_ddp: no python3 here imports torch (apt-get install python3-torch)\n");
    return std::getenv("CI") ? 1 : 77;  // under CI the set-up installs it: missing is a failure
  }
  orrery::Config config;
  if (!args.gpu) config.num_cpus = args.workers;
  orrery::Init(config, argc, argv);

  orrery::train::Entrypoint entrypoint;
  entrypoint.argv = {python, ORRERY_EXAMPLES_DIR "/train_torch_ddp.py", "--epochs",
                     std::to_string(args.epochs)};
  if (args.kill) {
    for (const char* a : {"--kill-rank", "1", "--kill-epoch", "3"}) entrypoint.argv.push_back(a);
  }
  orrery::train::ScalingConfig scaling;
  scaling.num_workers = args.workers;
  scaling.use_gpu = args.gpu;
  orrery::train::RunConfig run;
  run.name = "train_torch_ddp";
  run.storage_path =
      (std::filesystem::temp_directory_path() / "orrery_runs" / std::to_string(getpid())).string();
  run.checkpoint_config.num_to_keep = 2;
  run.failure_config.max_failures = args.kill ? 1 : 0;
  orrery::train::TorchConfig torch;
  torch.timeout_s = 300;
  orrery::train::TorchTrainer trainer(entrypoint, scaling, run, torch);
  orrery::train::Result result = trainer.Fit();
  if (result.error) {
    std::printf("training failed: %s\n", result.error->what());
    orrery::Shutdown();
    return 1;
  }
  double first = result.metrics_history.front().at("loss"), last = result.metrics.at("loss");
  std::printf(
      "loss %.4f -> %.6f over %zu reports, %d restart(s), ended at epoch %g; checkpoint %s\n",
      first, last, result.metrics_history.size(), result.num_failures, result.metrics.at("epoch"),
      result.checkpoint ? result.checkpoint->Path().c_str() : "(none)");
  bool ok = last < first && result.metrics.at("epoch") == args.epochs &&
            result.checkpoint.has_value() && result.num_failures == (args.kill ? 1 : 0);
  std::printf("%s\n", ok ? "ok: the loss fell and the run ended at its last epoch" : "FAIL");
  orrery::Shutdown();
  return ok ? 0 : 1;
}
