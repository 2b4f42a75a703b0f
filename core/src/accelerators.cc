#include "core/internal/accelerators.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/internal/labels.h"
#include "orrery/tpu.h"

namespace orrery::accel {

namespace fs = std::filesystem;

namespace {

constexpr const char* kGoogleVendor = "0x1ae0";
constexpr const char* kIntelVendor = "0x8086";

std::string Root(const std::string& sysroot, const std::string& path) {
  if (sysroot.empty() || sysroot == "/") return path;
  return sysroot + path;
}

std::string ReadTrimmed(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(' '));
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool IsNumber(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

// nvidia-smi under the sysroot (a fake one in tests), or at one of the driver's usual paths
// on the real host (never looked up on PATH: a daemon runs no program its environment names).
std::vector<std::string> NvidiaSmiNames(const std::string& sysroot) {
  std::string bin;
  if (sysroot.empty() || sysroot == "/") {
    for (const char* p :
         {"/usr/bin/nvidia-smi", "/usr/local/bin/nvidia-smi", "/usr/local/nvidia/bin/nvidia-smi"})
      if (access(p, X_OK) == 0) bin = p;
  } else if (access(Root(sysroot, "/usr/bin/nvidia-smi").c_str(), X_OK) == 0) {
    bin = Root(sysroot, "/usr/bin/nvidia-smi");
  }
  std::vector<std::string> names;
  if (bin.empty()) return names;
  std::string cmd = bin + " --query-gpu=index,name --format=csv,noheader 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return names;
  std::array<char, 512> line;
  while (std::fgets(line.data(), int(line.size()), p)) {
    std::string l = line.data();
    size_t comma = l.find(',');
    if (comma == std::string::npos) continue;
    std::string name = l.substr(comma + 1);
    name.erase(0, name.find_first_not_of(' '));
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
    names.push_back(name);
  }
  pclose(p);
  return names;
}

}  // namespace

Env ProcessEnv() {
  return [](const std::string& name) {
    const char* v = std::getenv(name.c_str());
    return std::string(v ? v : "");
  };
}

int CountTpuChips(const std::string& sysroot, std::vector<std::string>* notes) {
  int chips = 0;
  std::error_code ec;
  std::string dev = Root(sysroot, "/dev");
  for (const auto& e : fs::directory_iterator(dev, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("accel", 0) != 0) continue;
    if (e.is_directory(ec)) {  // NVIDIA drivers make /dev/accel/: not a TPU
      if (notes) notes->push_back("/dev/" + name + " is a directory, not a TPU");
      continue;
    }
    std::string vendor = ReadTrimmed(Root(sysroot, "/sys/class/accel/" + name + "/device/vendor"));
    if (!vendor.empty() && vendor != kGoogleVendor) {
      if (notes)
        notes->push_back("/dev/" + name + " has vendor " + vendor + ", not Google's: not a TPU");
      continue;
    }
    ++chips;
  }
  if (chips > 0) return chips;
  for (const auto& e : fs::directory_iterator(Root(sysroot, "/dev/vfio"), ec)) {
    std::string group = e.path().filename().string();
    if (!IsNumber(group)) continue;
    bool google = false;
    std::error_code ec2;
    for (const auto& d : fs::directory_iterator(
             Root(sysroot, "/sys/kernel/iommu_groups/" + group + "/devices"), ec2)) {
      if (ReadTrimmed((d.path() / "vendor").string()) == kGoogleVendor) google = true;
    }
    if (google) {
      ++chips;
    } else if (notes) {
      notes->push_back("/dev/vfio/" + group +
                       " is not a Google device (or its vendor is unreadable)");
    }
  }
  return chips;
}

std::string GpuModelName(const std::string& product) {
  static const std::regex model(
      R"((H200|H100|H800|H20|A100|A800|A10G|A10|A30|A40|L40S|L40|L4|V100|T4|P100|B200|GH200|GB200))");
  std::smatch m;
  if (std::regex_search(product, m, model)) return m.str(1);
  // Otherwise the last word that has a digit in it ("Tesla K80" -> "K80").
  std::stringstream ss(product);
  std::string word, best;
  while (ss >> word)
    if (std::any_of(word.begin(), word.end(),
                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      if (best.empty()) best = word;
  return best;
}

Result<Detected> Detect(const std::string& sysroot, const Env& env) {
  Detected d;
  // TPU
  d.tpu.chips = CountTpuChips(sysroot, &d.notes);
  d.tpu.pod_type = env("TPU_ACCELERATOR_TYPE");
  d.tpu.topology = env("TPU_TOPOLOGY");
  d.tpu.slice_name = env("TPU_NAME");
  std::string wid = env("TPU_WORKER_ID");
  if (!wid.empty()) {
    if (!IsNumber(wid))
      return Status::InvalidArgument("TPU_WORKER_ID must be a number, got '" + wid + "'");
    d.tpu.worker_id = std::atoi(wid.c_str());
  }
  d.tpu.worker_hostnames = SplitList(env("TPU_WORKER_HOSTNAMES"));

  // CUDA: nvidia-smi, else /proc/driver/nvidia/gpus/<bus id>/information.
  std::vector<std::string> names = NvidiaSmiNames(sysroot);
  if (names.empty()) {
    std::error_code ec;
    std::vector<std::string> dirs;
    for (const auto& e : fs::directory_iterator(Root(sysroot, "/proc/driver/nvidia/gpus"), ec))
      dirs.push_back(e.path().string());
    std::sort(dirs.begin(), dirs.end());
    for (const auto& dir : dirs) {
      std::ifstream in(dir + "/information");
      std::string line, model;
      while (std::getline(in, line))
        if (line.rfind("Model:", 0) == 0) model = line.substr(6);
      model.erase(0, model.find_first_not_of(" \t"));
      names.push_back(model);
    }
  }
  if (!names.empty()) {
    std::vector<int> all;
    for (int i = 0; i < int(names.size()); ++i) all.push_back(i);
    std::string visible = env("CUDA_VISIBLE_DEVICES");
    if (visible.empty()) {
      d.gpu.ids = all;
    } else {
      for (const auto& item : SplitList(visible)) {
        if (!IsNumber(item)) {
          d.notes.push_back("CUDA_VISIBLE_DEVICES entry '" + item + "' is not an index; skipped");
          continue;
        }
        int i = std::atoi(item.c_str());
        if (i < int(names.size()) &&
            std::find(d.gpu.ids.begin(), d.gpu.ids.end(), i) == d.gpu.ids.end())
          d.gpu.ids.push_back(i);
      }
    }
    if (!d.gpu.ids.empty()) d.gpu.model = GpuModelName(names[d.gpu.ids[0]]);
  }

  // XPU: Intel render nodes.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(Root(sysroot, "/sys/class/drm"), ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("renderD", 0) != 0) continue;
    if (ReadTrimmed((e.path() / "device/vendor").string()) == kIntelVendor) ++d.xpus;
  }

  std::string forced = env("ORRERY_DEVICE_TYPE");
  if (!forced.empty()) {
    if (forced != "tpu" && forced != "cuda" && forced != "xpu" && forced != "cpu") {
      return Status::InvalidArgument("ORRERY_DEVICE_TYPE must be tpu, cuda, xpu or cpu, got '" +
                                     forced + "'");
    }
    d.device_type = forced;
  } else if (d.tpu.chips > 0) {
    d.device_type = "tpu";
  } else if (!d.gpu.ids.empty()) {
    d.device_type = "cuda";
  } else if (d.xpus > 0) {
    d.device_type = "xpu";
  }
  return d;
}

Result<Advertised> Advertise(const Detected& d) {
  Advertised out;
  if (d.device_type == "tpu" && d.tpu.chips > 0) {
    out.resources["TPU"] = d.tpu.chips;
    for (int i = 0; i < d.tpu.chips; ++i) out.device_ids["TPU"].push_back(i);
    if (!d.tpu.pod_type.empty()) {
      auto pod = tpu::ParsePodType(d.tpu.pod_type);
      if (!pod.ok())
        return Status::InvalidArgument("TPU_ACCELERATOR_TYPE: " + pod.status().message());
      out.labels[kAcceleratorTypeLabel] = tpu::AcceleratorTypeName(pod->generation);
      out.labels[kTpuPodTypeLabel] = pod->name;
      if (d.tpu.worker_id == 0) out.resources["TPU-" + pod->name + "-head"] = 1;
    }
    if (!d.tpu.topology.empty()) out.labels[kTpuTopologyLabel] = d.tpu.topology;
    if (!d.tpu.slice_name.empty()) out.labels[kTpuSliceNameLabel] = d.tpu.slice_name;
    if (d.tpu.worker_id >= 0) out.labels[kTpuWorkerIdLabel] = std::to_string(d.tpu.worker_id);
  } else if (d.device_type == "cuda" && !d.gpu.ids.empty()) {
    out.resources["GPU"] = double(d.gpu.ids.size());
    out.device_ids["GPU"] = d.gpu.ids;
    if (!d.gpu.model.empty()) out.labels[kAcceleratorTypeLabel] = d.gpu.model;
  } else if (d.device_type == "xpu" && d.xpus > 0) {
    out.resources["XPU"] = d.xpus;
    for (int i = 0; i < d.xpus; ++i) out.device_ids["XPU"].push_back(i);
    out.labels[kAcceleratorTypeLabel] = "XPU";
  }
  return out;
}

Status AddDetected(Resources* resources, Labels* labels,
                   std::map<std::string, std::vector<int>>* device_ids) {
  Env env = ProcessEnv();
  auto detected = Detect(env("ORRERY_SYSROOT"), env);
  if (!detected.ok()) return detected.status();
  auto adv = Advertise(detected.value());
  if (!adv.ok()) return adv.status();
  for (const auto& [k, v] : adv->resources) resources->emplace(k, v);
  for (const auto& [k, v] : adv->labels) labels->emplace(k, v);
  for (const auto& [k, v] : adv->device_ids) device_ids->emplace(k, v);
  return Status::Ok();
}

}  // namespace orrery::accel
