// Simulated TPU hosts joining a real head: two hosts of a v4-16 slice (fake sysroots with
// four Google /dev/accel chips each, TPU_* variables) and one CPU node. Actors land by
// {"TPU": 4}, by the slice head resource and by slice labels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "orrery/orrery.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/skip_exit_code.h"

namespace {

using orrery_cluster::WaitFor;
using ::testing::HasSubstr;

class Chips {
 public:
  static Chips* Create() { return new Chips(); }
  std::string Node() {
    const char* n = std::getenv("ORRERY_NODE_ID");
    return n ? n : "";
  }
  std::vector<int> Ids() {
    auto ids = orrery::GetRuntimeContext().GetAcceleratorIds();
    return ids.count("TPU") ? ids["TPU"] : std::vector<int>{};
  }
  std::string Visible() {
    const char* v = std::getenv("TPU_VISIBLE_CHIPS");
    const char* b = std::getenv("TPU_CHIPS_PER_PROCESS_BOUNDS");
    return std::string(v ? v : "") + "|" + (b ? b : "");
  }
};
ORRERY_REMOTE(Chips::Create, &Chips::Node, &Chips::Ids, &Chips::Visible);

class TpuClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.StartHead(0.2, 3);
    for (int worker = 0; worker < 2; ++worker)
      cluster_.AddTpuV4Node("slice-a", worker, "host=tpu" + std::to_string(worker), 2);
    cluster_.AddCpuNode("host=cpu", 2);
    orrery::Config c;
    c.address = cluster_.head_address();
    c.infeasible_timeout_s = 1;
    orrery::Init(c);
    ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == 3; }));
  }
  void TearDown() override { orrery::Shutdown(); }

  std::string NodeOf(const std::string& host) {
    for (const auto& n : orrery::Nodes())
      if (n.labels.count("host") && n.labels.at("host") == host) return n.node_id.Hex();
    return "";
  }

  orrery_cluster::Cluster cluster_;
};

TEST_F(TpuClusterTest, HostsAdvertiseChipsSliceLabelsAndTheHeadResource) {
  int tpu_hosts = 0;
  for (const auto& n : orrery::Nodes()) {
    if (n.labels.at("host") == "cpu") {
      EXPECT_EQ(n.total.count("TPU"), 0u);
      EXPECT_EQ(n.labels.count("orrery.io/accelerator-type"), 0u);
      continue;
    }
    ++tpu_hosts;
    EXPECT_EQ(n.total.at("TPU"), 4);
    EXPECT_EQ(n.labels.at("orrery.io/accelerator-type"), "TPU-V4");
    EXPECT_EQ(n.labels.at("orrery.io/tpu-slice-name"), "slice-a");
    EXPECT_EQ(n.labels.at("orrery.io/tpu-pod-type"), "v4-16");
    EXPECT_EQ(n.labels.at("orrery.io/tpu-topology"), "2x2x2");
    bool worker0 = n.labels.at("host") == "tpu0";
    EXPECT_EQ(n.labels.at("orrery.io/tpu-worker-id"), worker0 ? "0" : "1");
    EXPECT_EQ(n.total.count("TPU-v4-16-head"), worker0 ? 1u : 0u);
  }
  EXPECT_EQ(tpu_hosts, 2);
  EXPECT_EQ(orrery::ClusterResources()["TPU"], 8);
}

TEST_F(TpuClusterTest, StatusShowsEachHostsAcceleratorsTopologyAndSlice) {
  std::string cmd = orrery_cluster::CliPath() + " status --address " + cluster_.head_address() +
                    " --redis-address " + cluster_.redis_address() + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof(buf), p)) out += buf;
  EXPECT_EQ(pclose(p), 0) << out;
  EXPECT_THAT(out, HasSubstr("TPU-V4 v4-16 2x2x2, slice slice-a worker 0, 32 GiB HBM/chip"));
  EXPECT_THAT(out, HasSubstr("TPU-V4 v4-16 2x2x2, slice slice-a worker 1, 32 GiB HBM/chip"));
  EXPECT_THAT(out, HasSubstr("TPU 0/4"));
}

TEST_F(TpuClusterTest, ActorsLandByChipsHeadResourceAndSliceLabels) {
  auto head = orrery::Actor(Chips::Create).SetResources({{"TPU-v4-16-head", 1}}).Remote();
  EXPECT_EQ(*orrery::Get(head.Task(&Chips::Node).Remote(), 30000), NodeOf("tpu0"));
  auto w1 = orrery::Actor(Chips::Create)
                .SetResources({{"TPU", 4}})
                .SetLabelSelector(
                    {{"orrery.io/tpu-slice-name", "slice-a"}, {"orrery.io/tpu-worker-id", "1"}})
                .Remote();
  EXPECT_EQ(*orrery::Get(w1.Task(&Chips::Node).Remote(), 30000), NodeOf("tpu1"));
  auto by_type = orrery::Actor(Chips::Create)
                     .SetResources({{"TPU", 4}})
                     .SetLabelSelector({{"orrery.io/accelerator-type", "TPU-V4"}})
                     .Remote();
  EXPECT_EQ(*orrery::Get(by_type.Task(&Chips::Node).Remote(), 30000),
            NodeOf("tpu0"));  // tpu1's chips are taken
}

TEST_F(TpuClusterTest, EachWorkerProcessGetsItsOwnChips) {
  auto on_tpu1 = [](int chips) {
    return orrery::Actor(Chips::Create)
        .SetResources({{"TPU", double(chips)}})
        .SetLabelSelector({{"host", "tpu1"}})
        .Remote();
  };
  auto a = on_tpu1(2);
  auto b = on_tpu1(1);
  auto c = on_tpu1(1);
  std::vector<int> ia = *orrery::Get(a.Task(&Chips::Ids).Remote(), 30000);
  std::vector<int> ib = *orrery::Get(b.Task(&Chips::Ids).Remote(), 30000);
  std::vector<int> ic = *orrery::Get(c.Task(&Chips::Ids).Remote(), 30000);
  EXPECT_EQ(ia.size(), 2u);
  EXPECT_EQ(ib.size(), 1u);
  EXPECT_EQ(ic.size(), 1u);
  std::set<int> all(ia.begin(), ia.end());
  all.insert(ib.begin(), ib.end());
  all.insert(ic.begin(), ic.end());
  EXPECT_EQ(all, (std::set<int>{0, 1, 2, 3})) << "no chip given to two live processes";
  // The environment the TPU runtime reads: the chips, and the bounds for a 2-chip process.
  std::string visible = std::to_string(ia[0]) + "," + std::to_string(ia[1]) + "|1,2,1";
  EXPECT_EQ(*orrery::Get(a.Task(&Chips::Visible).Remote(), 30000), visible);
  // A killed worker's chips go back to the node and the next worker gets them.
  b.Kill();
  auto d = on_tpu1(1);
  EXPECT_EQ(*orrery::Get(d.Task(&Chips::Ids).Remote(), 30000), ib);
}

TEST_F(TpuClusterTest, InvalidTpuAmountIsAConfigError) {
  EXPECT_THROW(orrery::Actor(Chips::Create).SetResources({{"TPU", 3}}).Remote(),
               orrery::ConfigError);
  EXPECT_THROW(orrery::Actor(Chips::Create).SetResources({{"TPU", 0.5}}).Remote(),
               orrery::ConfigError);
}

TEST_F(TpuClusterTest, MoreChipsThanAnyHostHasIsInfeasibleNamingTpu) {
  auto a = orrery::Actor(Chips::Create).SetResources({{"TPU", 8}}).Remote();
  try {
    orrery::Get(a.Task(&Chips::Node).Remote(), 30000);
    FAIL() << "expected InfeasibleError";
  } catch (const orrery::InfeasibleError& e) {
    EXPECT_THAT(e.what(), HasSubstr("TPU inventory"));
    EXPECT_THAT(e.what(), HasSubstr("slice-a"));
  }
}

class Gpu {
 public:
  static Gpu* Create() { return new Gpu(); }
  std::string Visible() {
    const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
    return v ? v : "";
  }
};
ORRERY_REMOTE(Gpu::Create, &Gpu::Visible);

TEST(GpuClusterTest, EachGpuWorkerSeesItsOwnDevice) {
  orrery_cluster::Cluster cluster;
  cluster.StartHead(0.2, 3);
  cluster.AddTwoGpuNode("host=gpu", 2);
  orrery::Config c;
  c.address = cluster.head_address();
  orrery::Init(c);
  ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == 1; }));
  auto node = orrery::Nodes()[0];
  EXPECT_EQ(node.total.at("GPU"), 2);
  EXPECT_EQ(node.labels.at("orrery.io/accelerator-type"), "A100");
  auto a = orrery::Actor(Gpu::Create).SetResources({{"GPU", 1}}).Remote();
  auto b = orrery::Actor(Gpu::Create).SetResources({{"GPU", 1}}).Remote();
  std::set<std::string> seen{*orrery::Get(a.Task(&Gpu::Visible).Remote(), 30000),
                             *orrery::Get(b.Task(&Gpu::Visible).Remote(), 30000)};
  EXPECT_EQ(seen, (std::set<std::string>{"0", "1"}));
  orrery::Shutdown();
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
