// DeviceAllocator: whole devices taken and given back, the environment that makes exactly
// them visible, and requests it must refuse without taking anything.
#include "node/src/device_allocator.h"

#include <gtest/gtest.h>

namespace orrery::node {
namespace {

TEST(DeviceAllocatorTest, WholeDevicesAreTakenAndGivenBack) {
  DeviceAllocator devices({{"CPU", 8}, {"GPU", 2}}, {});
  auto a = devices.Assign({{"GPU", 1}}, "n1");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a.value().devices.at("GPU"), std::vector<int>{0});
  EXPECT_EQ(a.value().env.at("CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(devices.Free("GPU"), std::vector<int>{1});
  auto b = devices.Assign({{"GPU", 1}}, "n1");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value().env.at("CUDA_VISIBLE_DEVICES"), "1");
  auto c = devices.Assign({{"GPU", 1}}, "n1");
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  devices.Release(a.value().devices);
  EXPECT_EQ(devices.Free("GPU"), std::vector<int>{0});
  devices.Release(b.value().devices);
  EXPECT_EQ(devices.Free("GPU"), (std::vector<int>{0, 1}));
}

TEST(DeviceAllocatorTest, TheGivenIdsAreUsed) {
  DeviceAllocator devices({{"GPU", 2}}, {{"GPU", {4, 6}}});
  auto a = devices.Assign({{"GPU", 2}}, "n1");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value().env.at("CUDA_VISIBLE_DEVICES"), "4,6");
  EXPECT_EQ(a.value().env.at("ORRERY_ACCELERATOR_IDS"), R"({"GPU":[4,6]})");
}

TEST(DeviceAllocatorTest, ATpuAmountAProcessCannotHoldIsInvalidAndTakesNothing) {
  DeviceAllocator devices({{"TPU", 4}, {"GPU", 1}}, {});
  auto a = devices.Assign({{"TPU", 3}, {"GPU", 1}}, "n1");
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("3 TPU chips"), std::string::npos) << a.status().message();
  EXPECT_EQ(devices.Free("TPU"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(devices.Free("GPU"), std::vector<int>{0});
  auto b = devices.Assign({{"TPU", 2}}, "n1");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b.value().env.at("TPU_VISIBLE_CHIPS"), "0,1");
  EXPECT_EQ(devices.Free("TPU"), (std::vector<int>{2, 3}));
}

TEST(DeviceAllocatorTest, ARequestThatCannotBeMetTakesNothing) {
  DeviceAllocator devices({{"TPU", 4}, {"GPU", 1}}, {});
  auto a = devices.Assign({{"TPU", 4}, {"GPU", 2}}, "n1");
  EXPECT_EQ(a.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(a.status().message().find("node n1 has 1 free GPU"), std::string::npos)
      << a.status().message();
  EXPECT_EQ(devices.Free("TPU").size(), 4u);
}

TEST(DeviceAllocatorTest, AFractionSharesADeviceAndTakesNone) {
  DeviceAllocator devices({{"GPU", 1}}, {});
  auto a = devices.Assign({{"GPU", 0.5}}, "n1");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a.value().devices.empty());
  EXPECT_EQ(a.value().env.at("CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(devices.Free("GPU"), std::vector<int>{0});
}

TEST(DeviceAllocatorTest, NoAcceleratorNoVisibleDevices) {
  DeviceAllocator devices({{"CPU", 2}}, {});
  auto a = devices.Assign({{"CPU", 1}}, "n1");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value().env.size(), 1u);
  EXPECT_EQ(a.value().env.at("ORRERY_ACCELERATOR_IDS"), "{}");
}

}  // namespace
}  // namespace orrery::node
