#include "orrery/train/config.h"

#include <cmath>
#include <numeric>

#include "orrery/errors.h"
#include "orrery/resources.h"
#include "orrery/tpu.h"

namespace orrery::train {

namespace {

[[noreturn]] void Fail(const std::string& message) {
  throw ConfigError("training configuration: " + message);
}

int Product(const std::vector<int>& v) {
  return std::accumulate(v.begin(), v.end(), 1, std::multiplies<int>());
}

std::string Join(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : "x") + std::to_string(x);
  return out;
}

// The slice the topology and accelerator type describe: its pod type, hosts and chips per
// host, how many slices the workers fill, and the default mesh.
void ResolveSlice(const ScalingConfig& s, ResolvedConfig& r) {
  if (s.accelerator_type.empty())
    Fail("topology \"" + s.topology + "\" needs accelerator_type (e.g. \"TPU-V4\")");
  auto gen = tpu::ParseAcceleratorType(s.accelerator_type);
  if (!gen.ok()) Fail("accelerator_type: " + gen.status().message());
  if (s.topology.empty())
    Fail("accelerator_type \"" + s.accelerator_type + "\" needs a topology (e.g. \"2x2x2\")");
  auto topo = tpu::ParseTopology(s.topology, gen.value());
  if (!topo.ok()) Fail("topology: " + topo.status().message());
  if (!topo->warning.empty()) r.warnings.push_back(topo->warning);
  auto slice = tpu::SliceFromTopology(gen.value(), s.topology);
  if (!slice.ok()) Fail("topology: " + slice.status().message());
  r.pod_type = slice->pod_type;
  r.hosts_per_slice = slice->hosts;
  r.chips_per_host = slice->chips_per_host;
  if (s.num_workers % slice->hosts != 0) {
    Fail("num_workers=" + std::to_string(s.num_workers) + " is not a multiple of the " +
         std::to_string(slice->hosts) + " hosts of a " + slice->pod_type + " slice (" + s.topology +
         "); use " + std::to_string(slice->hosts) + " for one slice or a multiple for several");
  }
  r.num_slices = s.num_workers / slice->hosts;
  r.mesh_shape = tpu::DefaultMeshShape(slice.value(), r.num_slices);
}

// resources_per_worker's TPU amount: the host's chips when not given, else a valid amount.
void ResolveTpuAmount(const ScalingConfig& s, int chips_per_host, ResolvedConfig& r) {
  auto tpu_it = s.resources_per_worker.find("TPU");
  if (tpu_it == s.resources_per_worker.end()) {
    if (chips_per_host == 0)
      Fail(
          "use_tpu needs resources_per_worker {\"TPU\": chips} or a topology and accelerator_type");
    r.resources_per_worker["TPU"] = chips_per_host;
  } else {
    double chips = tpu_it->second;
    if (chips <= 0)
      Fail("use_tpu with {\"TPU\": " + std::to_string(chips) +
           "}: ask for 1, 2, 4 or 8 chips per worker");
    if (chips != std::floor(chips))
      Fail("{\"TPU\": " + std::to_string(chips) + "}: TPU chips are whole");
    if (chips_per_host > 0) {
      Status st = tpu::ValidateChipsPerProcess(int(chips), chips_per_host);
      if (!st.ok()) Fail("resources_per_worker: " + st.message());
    } else if (chips != 1 && chips != 2 && chips != 4 && chips != 8) {
      Fail("{\"TPU\": " + std::to_string(int(chips)) +
           "} is not a TPU amount one worker can hold: use 1, 2, 4 or 8");
    }
  }
}

// The SPMD mesh and the data and model parallel sizes.
void ResolveMesh(const ScalingConfig& s, const TorchConfig& t, ResolvedConfig& r) {
  // Its product must be the device count (chips of all slices).
  int devices = r.mesh_shape.empty() ? int(r.resources_per_worker["TPU"]) * s.num_workers
                                     : Product(r.mesh_shape);
  const auto& x = t.xla_spmd_config;
  if (!x.mesh_shape.empty()) {
    if (Product(x.mesh_shape) != devices) {
      Fail("xla_spmd_config.mesh_shape " + Join(x.mesh_shape) + " has " +
           std::to_string(Product(x.mesh_shape)) + " devices, but the slice(s) have " +
           std::to_string(devices) + " chips");
    }
    r.mesh_shape = x.mesh_shape;
  }
  if (r.mesh_shape.empty()) r.mesh_shape = {devices};
  r.model_parallel_size = x.model_parallel_size > 0 ? x.model_parallel_size : r.mesh_shape.back();
  r.data_parallel_size =
      x.data_parallel_size > 0 ? x.data_parallel_size : devices / r.model_parallel_size;
  if (r.data_parallel_size * r.model_parallel_size != devices) {
    Fail("xla_spmd_config: data_parallel_size " + std::to_string(r.data_parallel_size) +
         " x model_parallel_size " + std::to_string(r.model_parallel_size) + " must equal the " +
         std::to_string(devices) + " chips");
  }
}

void ResolveTpu(const ScalingConfig& s, const TorchConfig& t, ResolvedConfig& r) {
  if (!s.label_selector.empty()) {
    Fail(
        "label_selector cannot be combined with use_tpu: TPU workers are placed on the hosts of "
        "one slice "
        "(by its slice-name label); remove label_selector");
  }
  bool needs_shape = s.num_workers > 1;
  if (needs_shape && (s.topology.empty() || s.accelerator_type.empty())) {
    Fail("use_tpu with " + std::to_string(s.num_workers) +
         " workers needs topology and accelerator_type, e.g. topology=\"2x2x2\", "
         "accelerator_type=\"TPU-V4\"");
  }
  int chips_per_host = 0;
  if (!s.accelerator_type.empty() || !s.topology.empty()) {
    ResolveSlice(s, r);
    chips_per_host = r.chips_per_host;
  }
  ResolveTpuAmount(s, chips_per_host, r);
  ResolveMesh(s, t, r);
}

}  // namespace

ResolvedConfig ResolveConfig(const ScalingConfig& s, const TorchConfig& t) {
  ResolvedConfig r;
  if (s.num_workers < 1)
    Fail("num_workers must be at least 1, got " + std::to_string(s.num_workers));
  if (s.use_gpu && s.use_tpu)
    Fail("use_gpu and use_tpu cannot both be set: choose one device type");
  if (!s.use_tpu && s.resources_per_worker.count("TPU")) {
    Fail(
        "resources_per_worker asks for TPU chips without use_tpu: set use_tpu = true (with "
        "topology and "
        "accelerator_type)");
  }
  static const char* kStrategies[] = {"PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"};
  bool strategy_ok = false;
  for (const char* k : kStrategies) strategy_ok = strategy_ok || s.placement_strategy == k;
  if (!strategy_ok)
    Fail("placement_strategy \"" + s.placement_strategy +
         "\": use PACK, SPREAD, STRICT_PACK or STRICT_SPREAD");
  Status rs = ValidateResources(s.resources_per_worker);
  if (!rs.ok()) Fail("resources_per_worker: " + rs.message());

  std::string chosen = s.use_tpu ? "xla_tpu" : (s.use_gpu ? "nccl" : "gloo");
  r.backend = t.backend.empty() ? chosen : t.backend;
  if (r.backend != "gloo" && r.backend != "nccl" && r.backend != "xla_tpu") {
    Fail("backend \"" + t.backend + "\": use gloo, nccl or xla_tpu (or leave it empty)");
  }
  if (r.backend == "xla_tpu" && !s.use_tpu) Fail("backend xla_tpu needs use_tpu = true");
  if (r.backend == "nccl" && !s.use_gpu) Fail("backend nccl needs use_gpu = true");
  if (s.use_tpu && r.backend != "xla_tpu")
    Fail("use_tpu runs the xla_tpu backend, not " + r.backend);
  if (t.timeout_s <= 0) Fail("timeout_s must be positive");
  r.num_workers = s.num_workers;
  r.resources_per_worker = s.resources_per_worker;
  if (s.use_tpu) {
    r.device = "xla";
    ResolveTpu(s, t, r);
  } else if (s.use_gpu) {
    r.device = "cuda";
    if (!r.resources_per_worker.count("GPU")) r.resources_per_worker["GPU"] = 1;
  } else {
    r.device = "cpu";
    if (r.resources_per_worker.empty()) r.resources_per_worker["CPU"] = 1;
  }
  if (!s.use_tpu &&
      (!t.xla_spmd_config.mesh_shape.empty() || t.xla_spmd_config.data_parallel_size > 0 ||
       t.xla_spmd_config.model_parallel_size > 0)) {
    Fail("xla_spmd_config applies to use_tpu training only");
  }
  return r;
}

}  // namespace orrery::train
