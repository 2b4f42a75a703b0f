// Accelerator detection against fake sysroots (ORRERY_SYSROOT): the hosts of the
// accelerators issue, built in a temporary directory per test.
#include "core/internal/accelerators.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "tests/fakes/temp_dir.h"

namespace orrery::accel {
namespace {

namespace fs = std::filesystem;

class FakeHost {
 public:
  // Thrown, not a gtest assertion (this is a constructor): without a folder, File() and
  // Dir() would write under the real /.
  FakeHost() {
    if (root_.path().empty()) throw std::runtime_error("mkdtemp failed for the fake sysroot");
  }
  void File(const std::string& path, const std::string& content = "") {
    fs::create_directories(fs::path(root_.path() + path).parent_path());
    std::ofstream(root_.path() + path) << content;
  }
  void Dir(const std::string& path) { fs::create_directories(root_.path() + path); }
  void Executable(const std::string& path, const std::string& script) {
    File(path, script);
    chmod((root_.path() + path).c_str(), 0755);
  }
  Env WithEnv(std::map<std::string, std::string> vars) const {
    return [vars](const std::string& k) {
      auto it = vars.find(k);
      return it == vars.end() ? std::string() : it->second;
    };
  }
  const std::string& root() const { return root_.path(); }

 private:
  orrery::testing::TempDir root_{"orrery_sysroot"};
};

// One host of a v4-16 slice: four chips, Google vendor.
void V4Host(FakeHost& h) {
  for (int i = 0; i < 4; ++i) {
    h.File("/dev/accel" + std::to_string(i));
    h.File("/sys/class/accel/accel" + std::to_string(i) + "/device/vendor", "0x1ae0\n");
  }
}

TEST(AcceleratorDetection, V4SliceHostsSeeTheirChipsAndSliceFacts) {
  for (int worker = 0; worker < 2; ++worker) {
    FakeHost h;
    V4Host(h);
    auto d = Detect(h.root(), h.WithEnv({{"TPU_ACCELERATOR_TYPE", "v4-16"},
                                         {"TPU_TOPOLOGY", "2x2x2"},
                                         {"TPU_WORKER_ID", std::to_string(worker)},
                                         {"TPU_NAME", "slice-a"},
                                         {"TPU_WORKER_HOSTNAMES", "host-0,host-1"}}));
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->device_type, "tpu");
    EXPECT_EQ(d->tpu.chips, 4);
    EXPECT_EQ(d->tpu.pod_type, "v4-16");
    EXPECT_EQ(d->tpu.topology, "2x2x2");
    EXPECT_EQ(d->tpu.worker_id, worker);
    EXPECT_EQ(d->tpu.slice_name, "slice-a");
    EXPECT_EQ(d->tpu.worker_hostnames, (std::vector<std::string>{"host-0", "host-1"}));
  }
}

TEST(AcceleratorDetection, V6eHostWithEightChips) {
  FakeHost h;
  for (int i = 0; i < 8; ++i) h.File("/dev/accel" + std::to_string(i));  // no vendor file: counted
  auto d = Detect(h.root(), h.WithEnv({{"TPU_ACCELERATOR_TYPE", "v6e-8"}, {"TPU_WORKER_ID", "0"}}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->device_type, "tpu");
  EXPECT_EQ(d->tpu.chips, 8);
}

TEST(AcceleratorDetection, GoogleVfioGroupsCountWhenThereIsNoAccelDevice) {
  FakeHost h;
  for (int g : {7, 8}) {
    h.File("/dev/vfio/" + std::to_string(g));
    h.File("/sys/kernel/iommu_groups/" + std::to_string(g) + "/devices/0000:00:0" +
               std::to_string(g) + ".0/vendor",
           "0x1ae0");
  }
  h.File("/dev/vfio/vfio");  // the control node is not a group
  h.File("/dev/vfio/9");     // a group whose vendor cannot be read does not count
  auto d = Detect(h.root(), h.WithEnv({}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->tpu.chips, 2);
  EXPECT_EQ(d->device_type, "tpu");
}

TEST(AcceleratorDetection, NonGoogleAccelDeviceIsNotATpu) {
  FakeHost h;  // an HPU-like host: /dev/accel0 from Habana
  h.File("/dev/accel0");
  h.File("/sys/class/accel/accel0/device/vendor", "0x1da3\n");
  auto d = Detect(h.root(), h.WithEnv({}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->tpu.chips, 0);
  EXPECT_EQ(d->device_type, "cpu");
  ASSERT_FALSE(d->notes.empty());
  EXPECT_NE(d->notes[0].find("0x1da3"), std::string::npos);
}

TEST(AcceleratorDetection, NvidiaAccelDirectoryIsNotATpu) {
  FakeHost h;
  h.Dir("/dev/accel");  // recent NVIDIA drivers create this directory
  h.File("/proc/driver/nvidia/gpus/0000:00:06.0/information",
         "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ: 40\n");
  auto d = Detect(h.root(), h.WithEnv({}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->tpu.chips, 0);
  EXPECT_EQ(d->device_type, "cuda");
  EXPECT_EQ(d->gpu.ids, (std::vector<int>{0}));
  EXPECT_EQ(d->gpu.model, "H100");
}

TEST(AcceleratorDetection, GpuHostThroughNvidiaSmiHonoursCudaVisibleDevices) {
  FakeHost h;
  h.Executable("/usr/bin/nvidia-smi",
               "#!/bin/sh\necho '0, NVIDIA A100-SXM4-40GB'\necho '1, NVIDIA A100-SXM4-40GB'\n");
  auto all = Detect(h.root(), h.WithEnv({}));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->device_type, "cuda");
  EXPECT_EQ(all->gpu.ids, (std::vector<int>{0, 1}));
  EXPECT_EQ(all->gpu.model, "A100");
  auto one = Detect(h.root(), h.WithEnv({{"CUDA_VISIBLE_DEVICES", "1"}}));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->gpu.ids, (std::vector<int>{1}));
  auto bad = Detect(h.root(), h.WithEnv({{"CUDA_VISIBLE_DEVICES", "5,GPU-abc"}}));
  ASSERT_TRUE(bad.ok());
  EXPECT_TRUE(bad->gpu.ids.empty());
  EXPECT_EQ(bad->device_type, "cpu");
}

TEST(AcceleratorDetection, IntelRenderNodesAreXpus) {
  FakeHost h;
  h.File("/sys/class/drm/renderD128/device/vendor", "0x8086\n");
  h.File("/sys/class/drm/renderD129/device/vendor", "0x8086\n");
  h.File("/sys/class/drm/renderD130/device/vendor", "0x1002\n");  // AMD: not an XPU
  auto d = Detect(h.root(), h.WithEnv({}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->xpus, 2);
  EXPECT_EQ(d->device_type, "xpu");
}

TEST(AcceleratorDetection, PriorityTpuOverCudaAndForcedType) {
  FakeHost h;
  V4Host(h);
  h.File("/proc/driver/nvidia/gpus/0000:00:06.0/information", "Model: NVIDIA L4\n");
  auto d = Detect(h.root(), h.WithEnv({}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->device_type, "tpu");
  auto forced = Detect(h.root(), h.WithEnv({{"ORRERY_DEVICE_TYPE", "cuda"}}));
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(forced->device_type, "cuda");
  EXPECT_FALSE(Detect(h.root(), h.WithEnv({{"ORRERY_DEVICE_TYPE", "quantum"}})).ok());
  EXPECT_FALSE(Detect(h.root(), h.WithEnv({{"TPU_WORKER_ID", "one"}})).ok());
}

TEST(AcceleratorDetection, EmptyHostIsCpu) {
  FakeHost h;
  auto d = Detect(h.root(), h.WithEnv({}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->device_type, "cpu");
  EXPECT_EQ(d->tpu.chips, 0);
  EXPECT_TRUE(d->gpu.ids.empty());
}

TEST(AcceleratorDetection, GpuModelNames) {
  EXPECT_EQ(GpuModelName("NVIDIA H100 80GB HBM3"), "H100");
  EXPECT_EQ(GpuModelName("NVIDIA A100-SXM4-40GB"), "A100");
  EXPECT_EQ(GpuModelName("Tesla K80"), "K80");
  EXPECT_EQ(GpuModelName("NVIDIA L4"), "L4");
}

}  // namespace
}  // namespace orrery::accel
