// tpu_spmd: SPMD training on a TPU slice. This machine has no TPU, so the example makes
// one: two simulated hosts of a v4-16 slice (fake /dev/accel chips and the TPU_* variables a
// TPU VM has, under ORRERY_SYSROOT), joined to a real head with `orrery start`. Fit() with
// use_tpu reserves the slice (the head bundle on worker 0, one bundle per host), starts one
// SPMD worker per host with the environment XLA needs, and runs the loop. Each worker
// describes its environment and its part of the mesh; the loop then runs its CPU fallback
// (there is no XLA device here) and says so.
//
//   ./tpu_spmd                  # starts and stops its own cluster in a temporary directory
//
// The `orrery` command is found next to this program's build (ORRERY_CLI overrides it).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "orrery/train/train.h"

namespace fs = std::filesystem;

namespace {

const char* kEnvShown[] = {"RANK",
                           "WORLD_SIZE",
                           "LOCAL_RANK",
                           "MASTER_ADDR",
                           "MASTER_PORT",
                           "PJRT_DEVICE",
                           "XLA_USE_SPMD",
                           "TPU_WORKER_ID",
                           "TPU_WORKER_HOSTNAMES",
                           "TPU_VISIBLE_CHIPS",
                           "TPU_CHIPS_PER_PROCESS_BOUNDS",
                           "TPU_PROCESS_BOUNDS",
                           "XLA_MESH_SHAPE",
                           "XLA_DATA_PARALLEL_SIZE",
                           "XLA_MODEL_PARALLEL_SIZE"};

std::string Ints(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

// Runs a shell command and returns its output (the example's own cluster set-up).
std::string Run(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[512];
    while (fgets(buf, sizeof(buf), p)) out += buf;
    if (pclose(p) != 0) throw std::runtime_error(command + " failed:\n" + out);
  }
  return out;
}

// A host with four Google TPU chips, as the accelerator detector sees it.
void FakeV4Host(const std::string& root) {
  for (int i = 0; i < 4; ++i) {
    fs::create_directories(root + "/dev");
    std::ofstream(root + "/dev/accel" + std::to_string(i)).close();
    std::string dev = root + "/sys/class/accel/accel" + std::to_string(i) + "/device";
    fs::create_directories(dev);
    std::ofstream(dev + "/vendor") << "0x1ae0\n";
  }
}

}  // namespace

void SpmdLoop(orrery::train::Context& ctx) {
  // What this SPMD process was given: the backend's environment and its part of the mesh.
  std::ostringstream about;
  about << "worker rank " << ctx.WorldRank() << " of " << ctx.WorldSize() << ", device "
        << ctx.Device() << "\n";
  for (const char* k : kEnvShown) {
    const char* v = std::getenv(k);
    about << "    " << k << "=" << (v ? v : "(unset)") << "\n";
  }
  const auto& mesh = ctx.Mesh();
  std::string axes;
  for (const auto& a : mesh.axis_names) axes += (axes.empty() ? "" : ",") + a;
  about << "    mesh shape " << Ints(mesh.shape) << " (" << axes << "), " << mesh.device_ids.size()
        << " devices; this worker's devices " << Ints(mesh.local_device_ids) << " at";
  for (const auto& c : mesh.local_coordinates) about << " (" << Ints(c) << ")";
  about << "\n";
  // No XLA runtime here: the loop runs the same SPMD program on the CPU.
  about << "    no XLA device on this host: running the CPU fallback\n";
  std::ofstream(ctx.RunPath() + "/worker_" + std::to_string(ctx.WorldRank()) + ".txt")
      << about.str();
  std::printf("%s", about.str().c_str());

  // The CPU fallback: each host sums its chips' shard of a vector; an all-reduce over the
  // slice gives every host the global sum, as a psum over the mesh would.
  std::vector<double> shard(mesh.local_device_ids.begin(), mesh.local_device_ids.end());
  std::vector<double> total{0};
  for (double d : shard) total[0] += d;
  ctx.AllReduce(total);
  ctx.Report({{"step", 1}, {"psum_device_ids", total[0]}, {"hosts", double(ctx.WorldSize())}});
}
ORRERY_REMOTE(SpmdLoop);

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  const char* cli_env = std::getenv("ORRERY_CLI");
  std::string cli = cli_env ? cli_env : ORRERY_CLI_PATH;
  fs::path dir = fs::temp_directory_path() / ("orrery_tpu_spmd_" + std::to_string(getpid()));
  fs::create_directories(dir);
  setenv("ORRERY_TMPDIR", dir.c_str(), 1);  // the cluster's session lives here, stop finds it

  int status = 1;
  try {
    std::string head = Run(cli + " start --head --port 0 --num-cpus 1 --no-dashboard 2>&1");
    std::string address = head.substr(head.find("started at ") + 11);
    address = address.substr(0, address.find(' '));
    std::printf("head at %s; adding two simulated v4-16 hosts (slice-a)\n", address.c_str());
    for (int worker = 0; worker < 2; ++worker) {
      std::string root = (dir / ("tpu_host" + std::to_string(worker))).string();
      FakeV4Host(root);
      std::string env = "ORRERY_SYSROOT=" + root +
                        " TPU_ACCELERATOR_TYPE=v4-16 TPU_TOPOLOGY=2x2x2 TPU_NAME=slice-a" +
                        " TPU_WORKER_ID=" + std::to_string(worker) +
                        " TPU_WORKER_HOSTNAMES=tpu-host-0,tpu-host-1 ";
      Run(env + cli + " start --address " + address + " --num-cpus 1 --labels host=tpu" +
          std::to_string(worker) + " 2>&1");
    }

    orrery::Config config;
    config.address = address;
    orrery::Init(config, argc, argv);
    orrery::train::ScalingConfig scaling;
    scaling.num_workers = 2;  // TPU hosts: one SPMD process per host
    scaling.use_tpu = true;
    scaling.topology = "2x2x2";
    scaling.accelerator_type = "TPU-V4";
    orrery::train::RunConfig run;
    run.name = "tpu_spmd";
    run.storage_path = (dir / "runs").string();
    orrery::train::TorchTrainer trainer(SpmdLoop, scaling, run);
    orrery::train::Result result = trainer.Fit();
    for (int rank = 0; rank < 2; ++rank) {
      std::ifstream in(result.path + "/worker_" + std::to_string(rank) + ".txt");
      std::printf("%s", std::string(std::istreambuf_iterator<char>(in), {}).c_str());
    }
    if (result.error) {
      std::printf("training failed: %s\n", result.error->what());
    } else {
      // Chips 0..7 of the slice: the global psum is 28 on every host.
      bool ok = result.metrics.at("psum_device_ids") == 28 && result.metrics.at("hosts") == 2;
      std::printf("%s: psum over the slice = %g\n", ok ? "ok" : "FAIL",
                  result.metrics.at("psum_device_ids"));
      status = ok ? 0 : 1;
    }
    orrery::Shutdown();
  } catch (const std::exception& e) {
    std::printf("tpu_spmd: %s\n", e.what());
  }
  std::system((cli + " stop >/dev/null 2>&1").c_str());
  std::error_code ec;
  fs::remove_all(dir, ec);
  return status;
}
