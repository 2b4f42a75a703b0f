// Reserving a training group (train/src/reservation.h): the feasibility check on made-up
// node lists, the placement groups' options, and the reservation timeout.
#include "train/src/reservation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "orrery/errors.h"
#include "orrery/train/config.h"
#include "tpu_slice_config.h"

namespace orrery::train {
namespace {

using ::testing::HasSubstr;

NodeInfo Node(const std::string& address, Resources total, Labels labels = {}, bool alive = true) {
  NodeInfo n;
  n.address = address;
  n.alive = alive;
  n.total = total;
  n.available = std::move(total);
  n.labels = std::move(labels);
  return n;
}

NodeInfo TpuHost(const std::string& address, const std::string& slice, const std::string& pod_type,
                 bool head) {
  Resources r{{"CPU", 8}, {"TPU", 4}};
  if (head) r["TPU-" + pod_type + "-head"] = 1;
  return Node(address, r,
              {{"orrery.io/tpu-slice-name", slice}, {"orrery.io/tpu-pod-type", pod_type}});
}

// CheckFeasible's status and kind (kNone when it set none).
struct Feasibility {
  Status status;
  proto::ErrorKind kind = proto::ErrorKind::kNone;
};

Feasibility Check(const ScalingConfig& scaling, const std::vector<NodeInfo>& nodes) {
  ResolvedConfig config = ResolveConfig(scaling, TorchConfig{});
  Feasibility f;
  f.status = CheckFeasible(config, scaling, nodes, &f.kind);
  return f;
}

TEST(CheckFeasible, NoHostOffersTheSliceHeadNamesTheSlicesThatExist) {
  // Only a v4-8 slice (and a v5 one) exist; the group wants a v4-16.
  std::vector<NodeInfo> nodes{
      TpuHost("10.0.0.1", "slice-a", "v4-8", true), TpuHost("10.0.0.2", "slice-a", "v4-8", false),
      TpuHost("10.0.0.3", "pod-b", "v5litepod-4", true), Node("10.0.0.9", {{"CPU", 16}})};
  Feasibility f = Check(V4Slice(2), nodes);
  ASSERT_FALSE(f.status.ok());
  EXPECT_EQ(f.kind, proto::ErrorKind::kAcceleratorNotAvailableError);
  EXPECT_THAT(f.status.message(), HasSubstr("TPU-v4-16-head"));
  EXPECT_THAT(f.status.message(), HasSubstr("slice-a"));
  EXPECT_THAT(f.status.message(), HasSubstr("v4-8"));
  EXPECT_THAT(f.status.message(), HasSubstr("pod-b"));
  EXPECT_THAT(f.status.message(), HasSubstr("v5litepod-4"));
}

TEST(CheckFeasible, NoTpuAtAllSaysSo) {
  Feasibility f = Check(V4Slice(2), {Node("10.0.0.9", {{"CPU", 16}})});
  ASSERT_FALSE(f.status.ok());
  EXPECT_EQ(f.kind, proto::ErrorKind::kAcceleratorNotAvailableError);
  EXPECT_THAT(f.status.message(), HasSubstr("none"));
}

TEST(CheckFeasible, OneSliceHeadFitsOneSliceNotTwo) {
  std::vector<NodeInfo> nodes{TpuHost("10.0.0.1", "slice-a", "v4-16", true),
                              TpuHost("10.0.0.2", "slice-a", "v4-16", false)};
  Feasibility one = Check(V4Slice(2), nodes);
  EXPECT_TRUE(one.status.ok()) << one.status.message();
  EXPECT_EQ(one.kind, proto::ErrorKind::kNone);
  Feasibility two = Check(V4Slice(4), nodes);
  ASSERT_FALSE(two.status.ok());
  EXPECT_EQ(two.kind, proto::ErrorKind::kAcceleratorNotAvailableError);
  EXPECT_THAT(two.status.message(), HasSubstr("2 v4-16 slices"));
}

TEST(CheckFeasible, ADeadSliceHeadDoesNotCount) {
  std::vector<NodeInfo> nodes{TpuHost("10.0.0.1", "slice-a", "v4-16", true)};
  nodes[0].alive = false;
  Feasibility f = Check(V4Slice(2), nodes);
  EXPECT_FALSE(f.status.ok());
  EXPECT_EQ(f.kind, proto::ErrorKind::kAcceleratorNotAvailableError);
}

TEST(CheckFeasible, TooFewCpusInTotalIsInfeasible) {
  std::vector<NodeInfo> nodes{Node("10.0.0.1", {{"CPU", 2}}), Node("10.0.0.2", {{"CPU", 1}}),
                              Node("10.0.0.3", {{"CPU", 8}}, {}, /*alive=*/false)};
  Feasibility f = Check(ScalingConfig{.num_workers = 4}, nodes);
  ASSERT_FALSE(f.status.ok());
  EXPECT_EQ(f.kind, proto::ErrorKind::kInfeasibleError);
  EXPECT_THAT(f.status.message(), HasSubstr("3 of the 4"));
  nodes.push_back(Node("10.0.0.4", {{"CPU", 1}}));
  Feasibility fits = Check(ScalingConfig{.num_workers = 4}, nodes);
  EXPECT_TRUE(fits.status.ok()) << fits.status.message();
}

TEST(CheckFeasible, StrategiesBoundWhatEachNodeHolds) {
  std::vector<NodeInfo> nodes{Node("10.0.0.1", {{"CPU", 2}}), Node("10.0.0.2", {{"CPU", 2}})};
  EXPECT_TRUE(
      Check(ScalingConfig{.num_workers = 3, .placement_strategy = "PACK"}, nodes).status.ok());
  EXPECT_TRUE(Check(ScalingConfig{.num_workers = 2, .placement_strategy = "STRICT_PACK"}, nodes)
                  .status.ok());
  Feasibility pack =
      Check(ScalingConfig{.num_workers = 3, .placement_strategy = "STRICT_PACK"}, nodes);
  EXPECT_FALSE(pack.status.ok());
  EXPECT_EQ(pack.kind, proto::ErrorKind::kInfeasibleError);
  EXPECT_TRUE(Check(ScalingConfig{.num_workers = 2, .placement_strategy = "STRICT_SPREAD"}, nodes)
                  .status.ok());
  EXPECT_FALSE(Check(ScalingConfig{.num_workers = 3, .placement_strategy = "STRICT_SPREAD"}, nodes)
                   .status.ok());
}

TEST(CheckFeasible, MissingGpusAreAnAcceleratorError) {
  Feasibility f =
      Check(ScalingConfig{.num_workers = 2, .use_gpu = true},
            {Node("10.0.0.1", {{"CPU", 8}, {"GPU", 1}}), Node("10.0.0.2", {{"CPU", 8}})});
  ASSERT_FALSE(f.status.ok());
  EXPECT_EQ(f.kind, proto::ErrorKind::kAcceleratorNotAvailableError);
}

TEST(CheckFeasible, TheLabelSelectorExcludesNodes) {
  std::vector<NodeInfo> nodes{Node("10.0.0.1", {{"CPU", 4}}, {{"zone", "a"}}),
                              Node("10.0.0.2", {{"CPU", 4}})};
  EXPECT_TRUE(
      Check(ScalingConfig{.num_workers = 4, .label_selector = {{"zone", "a"}}}, nodes).status.ok());
  Feasibility f = Check(ScalingConfig{.num_workers = 5, .label_selector = {{"zone", "a"}}}, nodes);
  EXPECT_FALSE(f.status.ok());
  EXPECT_EQ(f.kind, proto::ErrorKind::kInfeasibleError);
}

TEST(GroupOptions, TpuGetsOneStrictSpreadGroupPerSliceWithTheHeadInBundleZero) {
  ScalingConfig scaling = V4Slice(4);
  ResolvedConfig config = ResolveConfig(scaling, TorchConfig{});
  auto groups = GroupOptions(config, scaling, "train-run");
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_NE(groups[0].name, groups[1].name);
  for (const auto& g : groups) {
    SCOPED_TRACE(g.name);
    EXPECT_THAT(g.name, HasSubstr("train-run"));
    EXPECT_EQ(g.strategy, PlacementStrategy::STRICT_SPREAD);
    EXPECT_EQ(g.same_label, "orrery.io/tpu-slice-name");
    ASSERT_EQ(g.bundles.size(), 2u);
    EXPECT_EQ(g.bundles[0].at("TPU-v4-16-head"), 1);
    EXPECT_EQ(g.bundles[0].at("TPU"), 4);
    EXPECT_EQ(g.bundles[1].count("TPU-v4-16-head"), 0u);
    EXPECT_EQ(g.bundles[1].at("TPU"), 4);
  }
}

TEST(GroupOptions, CpuGetsOneGroupWithTheScalingStrategy) {
  ScalingConfig scaling{
      .num_workers = 3, .placement_strategy = "SPREAD", .label_selector = {{"zone", "a"}}};
  ResolvedConfig config = ResolveConfig(scaling, TorchConfig{});
  auto groups = GroupOptions(config, scaling, "train-run");
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].name, "train-run");
  EXPECT_EQ(groups[0].strategy, PlacementStrategy::SPREAD);
  EXPECT_EQ(groups[0].same_label, "");
  EXPECT_EQ(groups[0].label_selector, (Labels{{"zone", "a"}}));
  ASSERT_EQ(groups[0].bundles.size(), 3u);
  for (const auto& b : groups[0].bundles) EXPECT_EQ(b, (Resources{{"CPU", 1}}));
  for (const char* s : {"PACK", "STRICT_PACK", "STRICT_SPREAD"}) {
    scaling.placement_strategy = s;
    auto g = GroupOptions(ResolveConfig(scaling, TorchConfig{}), scaling, "p");
    ASSERT_EQ(g.size(), 1u);
    EXPECT_STREQ(PlacementStrategyName(g[0].strategy), s);
  }
}

// Sets TRAIN_PLACEMENT_GROUP_TIMEOUT_S for one test and puts the old value back.
class ReservationTimeoutTest : public ::testing::Test {
 protected:
  static constexpr const char* kVar = "TRAIN_PLACEMENT_GROUP_TIMEOUT_S";
  void SetUp() override {
    if (const char* v = std::getenv(kVar)) saved_ = v;
    unsetenv(kVar);
  }
  void TearDown() override {
    if (saved_) {
      setenv(kVar, saved_->c_str(), 1);
    } else {
      unsetenv(kVar);
    }
  }
  std::optional<std::string> saved_;
};

TEST_F(ReservationTimeoutTest, DefaultIsOneHundredSeconds) {
  EXPECT_EQ(ReservationTimeout(RunConfig{}), 100);
  setenv(kVar, "", 1);
  EXPECT_EQ(ReservationTimeout(RunConfig{}), 100);
}

TEST_F(ReservationTimeoutTest, TheEnvironmentIsUsedWhenTheRunConfigSaysNothing) {
  setenv(kVar, "2.5", 1);
  EXPECT_EQ(ReservationTimeout(RunConfig{}), 2.5);
  setenv(kVar, "0", 1);
  EXPECT_EQ(ReservationTimeout(RunConfig{}), 0);
}

TEST_F(ReservationTimeoutTest, TheRunConfigWins) {
  setenv(kVar, "2.5", 1);
  EXPECT_EQ(ReservationTimeout(RunConfig{.reservation_timeout_s = 7}), 7);
  EXPECT_EQ(ReservationTimeout(RunConfig{.reservation_timeout_s = 0}), 0);
  setenv(kVar, "garbage", 1);
  EXPECT_EQ(ReservationTimeout(RunConfig{.reservation_timeout_s = 7}), 7);
}

TEST_F(ReservationTimeoutTest, AMalformedVariableIsAConfigError) {
  for (const char* bad : {"abc", "10s", "-1", " "}) {
    setenv(kVar, bad, 1);
    EXPECT_THROW(ReservationTimeout(RunConfig{}), ConfigError) << "\"" << bad << "\"";
  }
  setenv(kVar, "abc", 1);
  try {
    ReservationTimeout(RunConfig{});
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("TRAIN_PLACEMENT_GROUP_TIMEOUT_S"));
  }
}

}  // namespace
}  // namespace orrery::train
