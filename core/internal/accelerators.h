// Accelerator detection (docs/accelerators.md "Detection"): one detector per device
// kind, priority TPU > CUDA > XPU > CPU for the node's primary device type.
//
// Every path is read under a sysroot (ORRERY_SYSROOT, default "/"), so tests simulate any
// host with a fake /dev, /sys and /proc tree. ORRERY_DEVICE_TYPE=tpu|cuda|xpu|cpu forces the
// primary type. The environment is passed in, not read, so detection is a pure function of
// (sysroot, environment) apart from running nvidia-smi when it exists.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "orrery/config.h"
#include "orrery/status.h"

namespace orrery::accel {

using Env = std::function<std::string(const std::string&)>;  // "" when unset
Env ProcessEnv();

struct TpuHost {
  int chips = 0;
  std::string pod_type;                       // TPU_ACCELERATOR_TYPE, e.g. "v4-16"
  std::string topology;                       // TPU_TOPOLOGY, e.g. "2x2x2"
  int worker_id = -1;                         // TPU_WORKER_ID
  std::string slice_name;                     // TPU_NAME
  std::vector<std::string> worker_hostnames;  // TPU_WORKER_HOSTNAMES
};

struct GpuHost {
  std::vector<int> ids;  // visible device indices (after CUDA_VISIBLE_DEVICES)
  std::string model;     // "H100", "A100", ... ("" when unknown)
};

struct Detected {
  std::string device_type = "cpu";  // primary: tpu, cuda, xpu or cpu
  TpuHost tpu;
  GpuHost gpu;
  int xpus = 0;
  std::vector<std::string> notes;  // what was skipped and why (for logs)
};

// Detects everything under `sysroot` ("" or "/" for the real host).
Result<Detected> Detect(const std::string& sysroot, const Env& env);

// What a node with this hardware advertises (docs/accelerators.md "What a node advertises"):
// `TPU: chips`, `TPU-<pod type>-head: 1` on worker 0 of a slice, `GPU: n`, `XPU: n`, the labels
// orrery.io/accelerator-type, tpu-slice-name, tpu-worker-id, tpu-topology, tpu-pod-type.
// InvalidArgument when the TPU variables are malformed (e.g. an unknown pod type).
struct Advertised {
  Resources resources;
  Labels labels;
  std::map<std::string, std::vector<int>> device_ids;  // per kind: the ids workers are given
};
Result<Advertised> Advertise(const Detected& detected);

// Detects this host (ORRERY_SYSROOT, the process environment) and merges what it finds
// under `resources`/`labels`: explicit entries (flags, --resources) win.
Status AddDetected(Resources* resources, Labels* labels,
                   std::map<std::string, std::vector<int>>* device_ids);

// Count of TPU chips: /dev/accel* files (not directories) whose vendor, when known, is
// Google (0x1ae0); else numeric /dev/vfio groups whose devices are Google's.
int CountTpuChips(const std::string& sysroot, std::vector<std::string>* notes);
// GPU model name from a product string: "NVIDIA H100 80GB HBM3" -> "H100".
std::string GpuModelName(const std::string& product);

}  // namespace orrery::accel
