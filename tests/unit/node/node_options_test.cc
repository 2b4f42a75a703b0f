// A node's options from its host (node/internal/node_options.h): CPU and memory as given or
// read from the host, extra resources and labels over them, and the accelerators detected
// under a fake sysroot (ORRERY_SYSROOT), which never replace what was given.
#include "node/internal/node_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>

#include "tests/fakes/temp_dir.h"
#include "tests/fakes/tpu_host.h"

namespace orrery::node {
namespace {

using ::testing::StartsWith;

// A fake host root for one test, named by ORRERY_SYSROOT (ORRERY_DEVICE_TYPE cleared); the
// environment is put back after.
class FakeHost : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"ORRERY_SYSROOT", "ORRERY_DEVICE_TYPE"}) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
    }
    ASSERT_FALSE(root_.path().empty()) << "mkdtemp failed";
    setenv("ORRERY_SYSROOT", root_.path().c_str(), 1);
    unsetenv("ORRERY_DEVICE_TYPE");
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  // Four TPU chips (Google's vendor id), as docs/accelerators.md "Detection" reads them.
  void AddTpuChips() { ::orrery::testing::MakeTpuHostRoot(root_.path()); }

  orrery::testing::TempDir root_{"orrery_node_options"};
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(FakeHost, CpuAndMemoryAsGiven) {
  HostResources host;
  host.num_cpus = 3;
  host.memory = 1e9;
  host.labels = {{"zone", "a"}};
  auto no = NodeOptionsFromHost(host);
  ASSERT_TRUE(no.ok()) << no.status().message();
  EXPECT_EQ(no->resources, (Resources{{"CPU", 3}, {"memory", 1e9}}));
  EXPECT_EQ(no->labels, (Labels{{"zone", "a"}}));
  EXPECT_TRUE(no->accelerator_ids.empty());
}

TEST_F(FakeHost, DefaultsAreTheHostsCoresAndMemory) {
  auto no = NodeOptionsFromHost({});
  ASSERT_TRUE(no.ok()) << no.status().message();
  EXPECT_GE(no->resources.at("CPU"), 1);
  EXPECT_GT(no->resources.at("memory"), 0);
}

TEST_F(FakeHost, ZeroMemoryAdvertisesNoneAndResourcesWin) {
  HostResources host;
  host.num_cpus = 0;
  host.memory = 0;
  host.resources = {{"CPU", 8}, {"custom", 2}};
  auto no = NodeOptionsFromHost(host);
  ASSERT_TRUE(no.ok()) << no.status().message();
  EXPECT_EQ(no->resources, (Resources{{"CPU", 8}, {"custom", 2}}));
}

TEST_F(FakeHost, DetectedAcceleratorsAreAddedUnderWhatWasGiven) {
  AddTpuChips();
  HostResources host;
  host.num_cpus = 1;
  host.memory = 0;
  auto detected = NodeOptionsFromHost(host);
  ASSERT_TRUE(detected.ok()) << detected.status().message();
  EXPECT_EQ(detected->resources.at("TPU"), 4);
  EXPECT_EQ(detected->accelerator_ids.at("TPU"), (std::vector<int>{0, 1, 2, 3}));
  host.resources = {{"TPU", 2}};
  auto given = NodeOptionsFromHost(host);
  ASSERT_TRUE(given.ok()) << given.status().message();
  EXPECT_EQ(given->resources.at("TPU"), 2);
}

TEST_F(FakeHost, DetectionErrorsSaySo) {
  setenv("ORRERY_DEVICE_TYPE", "abacus", 1);
  auto no = NodeOptionsFromHost({});
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(no.status().message(), StartsWith("accelerator detection: ORRERY_DEVICE_TYPE"));
}

}  // namespace
}  // namespace orrery::node
