// gpu_actors: every worker process that asks for whole GPUs gets devices of its own. The
// node sets CUDA_VISIBLE_DEVICES to them before the worker starts, and
// orrery::GetRuntimeContext().GetAcceleratorIds() names the same ids inside it; a fractional
// amount shares one device (docs/accelerators.md). The GPU actor also runs a probe command
// (by default `nvidia-smi -L`) to show that the device is usable from inside the worker.
//
//   ./gpu_actors                               # the embedded cluster: this host's GPUs
//   ORRERY_ADDRESS=127.0.0.1:6380 ./gpu_actors 'python3 -c "import torch;
//   print(torch.cuda.device_count())"'
//
// On a cluster without GPUs it shows what a worker without any sees, then exits 77 (skipped).
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "example_main.h"
#include "orrery/orrery.h"

// What a worker process sees of its GPUs.
struct GpuView {
  std::string cuda_visible_devices = "(unset)";
  std::vector<int> gpu_ids;  // GetRuntimeContext().GetAcceleratorIds()["GPU"]
  int probe_status = -1;     // the probe's exit status; -1 when none ran
  std::string probe_output;  // its stdout and stderr
  MSGPACK_DEFINE(cuda_visible_devices, gpu_ids, probe_status, probe_output);
};

// Runs in the worker: its environment, its runtime context, and `probe` when not empty.
GpuView DescribeWorker(std::string probe) {
  GpuView v;
  if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES")) v.cuda_visible_devices = cvd;
  auto ids = orrery::GetRuntimeContext().GetAcceleratorIds();
  if (auto it = ids.find("GPU"); it != ids.end()) v.gpu_ids = it->second;
  if (probe.empty()) return v;
  if (FILE* p = popen((probe + " 2>&1").c_str(), "r")) {
    char buf[512];
    while (fgets(buf, sizeof(buf), p)) v.probe_output += buf;
    int status = pclose(p);
    v.probe_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return v;
}

// An actor holds its devices for as long as it lives.
class GpuHolder {
 public:
  static GpuHolder* Create() { return new GpuHolder(); }
  GpuView Describe(std::string probe) { return DescribeWorker(std::move(probe)); }
};

ORRERY_REMOTE(DescribeWorker, GpuHolder::Create, &GpuHolder::Describe);

namespace {

using orrery_examples::Check;

constexpr int kTimeoutMs = 120000;  // a worker's start, and the probe (a CUDA init) in it
std::string probe = "nvidia-smi -L";
bool skipped = false;

std::string Ids(const std::vector<int>& ids) {
  std::string out;
  for (int i : ids) {
    if (!out.empty()) out += ',';
    out += std::to_string(i);
  }
  return out;
}

// Prints a worker's view; checks that it holds `n` GPUs, named alike in both places.
bool CheckView(const GpuView& v, size_t n) {
  std::printf("    CUDA_VISIBLE_DEVICES=%s, GetAcceleratorIds()[\"GPU\"]={%s}\n",
              v.cuda_visible_devices.c_str(), Ids(v.gpu_ids).c_str());
  bool ok = Check(v.gpu_ids.size() == n, "the worker holds " + std::to_string(n) + " GPU(s)");
  if (n > 0) {
    ok &= Check(v.cuda_visible_devices == Ids(v.gpu_ids),
                "CUDA_VISIBLE_DEVICES names the runtime context's ids");
  }
  return ok;
}

// An actor holding one whole GPU, running the probe inside.
bool WholeGpuActor() {
  auto actor = orrery::Actor(GpuHolder::Create).SetResources({{"GPU", 1}}).Remote();
  GpuView v = *orrery::Get(actor.Task(&GpuHolder::Describe).Remote(probe), kTimeoutMs);
  bool ok = CheckView(v, 1);
  std::printf("%s", v.probe_output.c_str());
  ok &= Check(v.probe_status == 0, "`" + probe + "` ran in the worker (exit status " +
                                       std::to_string(v.probe_status) + ")");
  actor.Kill();  // its device goes back to the node
  return ok;
}

// Two actors holding half a GPU each: they share one device.
bool HalfGpuActors() {
  std::vector<orrery::ActorHandle<GpuHolder>> halves;
  std::vector<orrery::ObjectRef<GpuView>> views;
  for (int i = 0; i < 2; ++i) {
    halves.push_back(orrery::Actor(GpuHolder::Create).SetResources({{"GPU", 0.5}}).Remote());
    views.push_back(halves.back().Task(&GpuHolder::Describe).Remote(std::string()));
  }
  auto a = orrery::Get(views[0], kTimeoutMs);
  auto b = orrery::Get(views[1], kTimeoutMs);
  bool ok = CheckView(*a, 1);
  ok &= CheckView(*b, 1);
  ok &= Check(a->gpu_ids == b->gpu_ids, "both halves share one device");
  for (auto& h : halves) h.Kill();
  return ok;
}

// A task, then an actor, each asking for one whole GPU: the task's worker exits when its
// lease ends, and its device must be back before the actor's worker takes it.
bool TaskThenActor() {
  auto task = orrery::Task(DescribeWorker).SetResources({{"GPU", 1}}).Remote(std::string());
  bool ok = CheckView(*orrery::Get(task, kTimeoutMs), 1);
  auto actor = orrery::Actor(GpuHolder::Create).SetResources({{"GPU", 1}}).Remote();
  ok &= CheckView(*orrery::Get(actor.Task(&GpuHolder::Describe).Remote(std::string()), kTimeoutMs),
                  1);
  actor.Kill();
  return ok;
}

// Runs one part; an orrery::Error fails that part only.
bool Part(const char* title, bool (*part)()) {
  std::printf("%s:\n", title);
  try {
    return part();
  } catch (const orrery::Error& e) {
    return Check(false, std::string(e.kind()) + ": " + e.what());
  }
}

bool Run() {
  double gpus = 0;
  if (auto total = orrery::ClusterResources(); total.count("GPU")) gpus = total.at("GPU");
  std::printf("the cluster offers GPU: %g\n", gpus);

  std::printf("a task that asks for no GPU:\n");
  bool ok =
      CheckView(*orrery::Get(orrery::Task(DescribeWorker).Remote(std::string()), kTimeoutMs), 0);
  if (gpus < 1) {
    std::printf("no GPU in this cluster: the GPU checks are skipped\n");
    skipped = true;
    return ok;
  }
  ok &= Part("an actor that asks for {\"GPU\": 1}", WholeGpuActor);
  ok &= Part("two actors that ask for {\"GPU\": 0.5} each", HalfGpuActors);
  ok &= Part("a task, then an actor, that ask for {\"GPU\": 1} each", TaskThenActor);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  orrery::Init(argc, argv);
  if (argc > 1 && std::string(argv[1]).rfind("--", 0) != 0) probe = argv[1];  // before flags
  int status = orrery_examples::RunThenShutdown("gpu_actors", Run);
  return status == 0 && skipped ? 77 : status;
}
