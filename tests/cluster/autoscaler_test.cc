// The autoscaler against real daemons (docs/autoscaler.md): `orrery autoscaler` with the
// local provider starts and stops real `orrery node` processes for the demands a real head
// reports. Demands for 8 CPUs on a 2-CPU cluster bring up two 4-CPU nodes and run; idle,
// they are removed, and `orrery status` says why. A demand no node could hold waits for a
// group that could; one no group can hold fails, naming the groups. TPU slice groups add
// whole simulated v4-16 slices for a use_tpu Fit. A failing provider command is retried with
// backoff. Bad configs are refused with what to change.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "orrery/orrery.h"
#include "orrery/train/train.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/skip_exit_code.h"

using orrery_cluster::WaitFor;

namespace {

class Holder {
 public:
  static Holder* Create() { return new Holder(); }
  int Ping() { return 1; }
};
ORRERY_REMOTE(Holder::Create, &Holder::Ping);

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "<unset>" : v;
}

// One SPMD process per TPU host: rank 0 reports the world size, the sum of the TPU worker
// ids, the slice's host count and whether every rank saw the same slice name.
void SliceLoop(orrery::train::Context& ctx) {
  std::string hosts = Env("TPU_WORKER_HOSTNAMES");
  int64_t host_count = hosts == "<unset>" ? 0 : 1 + std::count(hosts.begin(), hosts.end(), ',');
  std::vector<int64_t> mine{std::stoll(Env("TPU_WORKER_ID")), host_count,
                            int64_t(std::hash<std::string>{}(Env("TPU_NAME")) & 0xffff)};
  std::vector<int64_t> all = ctx.AllGather(mine);
  int64_t ids = 0, same_slice = 1;
  for (size_t i = 0; i + 2 < all.size(); i += 3) {
    ids += all[i];
    same_slice &= int64_t(all[i + 2] == all[2]);
  }
  ctx.Report({{"world", ctx.WorldSize()},
              {"worker_id_sum", ids},
              {"slice_hosts", host_count},
              {"same_slice", same_slice}});
}
ORRERY_REMOTE(SliceLoop);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Runs the CLI, returning {exit code, stdout+stderr}.
using orrery_cluster::RunCli;

int NodesOfGroup(const std::string& group) {
  int n = 0;
  for (const auto& node : orrery::Nodes()) {
    auto it = node.labels.find("orrery.io/autoscaler-group");
    n += node.alive && it != node.labels.end() && it->second == group;
  }
  return n;
}

class AutoscalerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.StartHead(1.0, 5);  // the defaults: the autoscaler's nodes heartbeat at theirs
    cluster_.AddCpuNode("", 2);
    orrery::Config c;
    c.address = cluster_.head_address();
    c.infeasible_timeout_s = 2;
    orrery::Init(c);
    ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == 1; }));
  }
  void TearDown() override {
    StopAutoscaler();
    orrery::Shutdown();
  }

  std::string WriteConfig(const std::string& name, const std::string& yaml) {
    std::string path = cluster_.dir() + "/" + name;
    std::ofstream(path) << yaml;
    return path;
  }
  void StartAutoscaler(const std::string& config,
                       const std::vector<std::pair<std::string, std::string>>& env = {}) {
    log_ = cluster_.dir() + "/autoscaler.log";
    pid_ = cluster_.SpawnTied({orrery_cluster::CliPath(), "autoscaler", "--config", config,
                               "--address", cluster_.head_address()},
                              log_, env);
  }
  // SIGTERM: the autoscaler stops the nodes it started, then exits.
  void StopAutoscaler() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  orrery_cluster::Cluster cluster_;
  std::string log_;
  int pid_ = -1;
};

TEST_F(AutoscalerTest, AddsNodesForWaitingDemandsAndRemovesThemWhenIdle) {
  StartAutoscaler(WriteConfig("cpu.yaml", R"(interval_s: 0.5
groups:
  - name: cpu4
    resources: {CPU: 4}
    min: 0
    max: 3
    idle_timeout_s: 3
)"));
  auto start = std::chrono::steady_clock::now();
  std::vector<orrery::ActorHandle<Holder>> actors;
  for (int i = 0; i < 4; ++i)  // 8 CPUs: one fits the 2-CPU node, three wait
    actors.push_back(orrery::Actor(Holder::Create).SetResources({{"CPU", 2}}).Remote());
  for (auto& a : actors) EXPECT_EQ(*orrery::Get(a.Task(&Holder::Ping).Remote(), 30000), 1);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 10.0) << ReadFile(log_);
  EXPECT_EQ(NodesOfGroup("cpu4"), 2) << "the fewest 4-CPU nodes for 6 waiting CPUs\n"
                                     << ReadFile(log_);
  std::printf("4 actors of 2 CPUs ran after %.1f s\n", took);

  for (auto& a : actors) a.Kill();
  EXPECT_TRUE(WaitFor([] { return NodesOfGroup("cpu4") == 0; }, 30000)) << ReadFile(log_);
  // The autoscaler's next sync brings its decisions to the head's "autoscaler" record.
  std::string status;
  EXPECT_TRUE(WaitFor([&] {
    status = RunCli("status --address " + cluster_.head_address() + " --redis-address " +
                    cluster_.redis_address())
                 .second;
    return status.find("scale_down") != std::string::npos;
  })) << status;
  EXPECT_NE(status.find("Autoscaler"), std::string::npos) << status;
  EXPECT_NE(status.find("idle for"), std::string::npos) << status;
  EXPECT_NE(status.find("scale_up 2"), std::string::npos) << status;
}

TEST_F(AutoscalerTest, AnInfeasibleDemandWaitsForAGroupAndOneNoGroupCanHoldFails) {
  StartAutoscaler(WriteConfig("cpu.yaml", R"(interval_s: 0.5
groups:
  - name: cpu4
    resources: {CPU: 4}
    max: 1
    idle_timeout_s: 60
)"));
  ASSERT_TRUE(WaitFor([&] { return ReadFile(log_).find("autoscaler for") != std::string::npos; }));
  // 3 CPUs: no node has them, but a cpu4 node would. It waits past the infeasible timeout.
  auto three = orrery::Actor(Holder::Create).SetResources({{"CPU", 3}}).Remote();
  EXPECT_EQ(*orrery::Get(three.Task(&Holder::Ping).Remote(), 30000), 1) << ReadFile(log_);
  // 16 CPUs: no group can hold it.
  auto start = std::chrono::steady_clock::now();
  auto big = orrery::Actor(Holder::Create).SetResources({{"CPU", 16}}).Remote();
  try {
    orrery::Get(big.Task(&Holder::Ping).Remote(), 30000);
    ADD_FAILURE() << "an actor no group can hold was placed";
  } catch (const orrery::Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("no autoscaler group can hold it"), std::string::npos) << what;
    EXPECT_NE(what.find("cpu4 {CPU: 4}"), std::string::npos) << what;
  }
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 10.0);
}

TEST_F(AutoscalerTest, AFailingProviderCommandIsRetriedWithBackoffAndReported) {
  StartAutoscaler(WriteConfig("cmd.yaml", R"(interval_s: 0.2
provider:
  type: command
  create: "echo no quota left in $ORRERY_GROUP for $ORRERY_NODE_NAME >&2; exit 3"
  delete: "true"
groups:
  - name: cloud
    resources: {CPU: 8}
    max: 2
)"));
  auto waiting = orrery::Actor(Holder::Create).SetResources({{"CPU", 8}}).Remote();
  ASSERT_TRUE(WaitFor([&] { return ReadFile(log_).find("retrying in 4 s") != std::string::npos; }))
      << ReadFile(log_);
  std::string log = ReadFile(log_);
  EXPECT_NE(log.find("exited with 3: no quota left in cloud for cloud-0"), std::string::npos)
      << log;
  EXPECT_NE(log.find("retrying in 1 s"), std::string::npos) << log;
  EXPECT_NE(log.find("retrying in 2 s"), std::string::npos) << log;
  EXPECT_EQ(waitpid(pid_, nullptr, WNOHANG), 0) << "the autoscaler exited";
  auto [code, status] = RunCli("status --address " + cluster_.head_address() + " --redis-address " +
                               cluster_.redis_address());
  EXPECT_NE(status.find("no quota left"), std::string::npos) << status;
  waiting.Kill();
}

TEST_F(AutoscalerTest, ATpuGroupAddsAndRemovesWholeSlicesForAUseTpuFit) {
  // This host as a TPU host: four Google chips under a fake root the nodes read.
  std::string root = cluster_.dir() + "/tpu_host";
  orrery_cluster::MakeTpuHostRoot(root);
  StartAutoscaler(WriteConfig("tpu.yaml", R"(interval_s: 0.5
groups:
  - name: tpu
    tpu: {accelerator_type: v4-16, topology: 2x2x2, hosts: 2}
    resources: {CPU: 2}
    max: 2
    idle_timeout_s: 2
)"),
                  {{"ORRERY_SYSROOT", root}});
  ASSERT_TRUE(WaitFor([&] { return ReadFile(log_).find("autoscaler for") != std::string::npos; }));
  orrery::train::ScalingConfig scaling;
  scaling.num_workers = 2;
  scaling.use_tpu = true;
  scaling.topology = "2x2x2";
  scaling.accelerator_type = "TPU-V4";
  orrery::train::RunConfig run;
  run.name = "autoscaled_slice";
  run.storage_path = cluster_.dir() + "/runs";
  orrery::train::Result result = orrery::train::TorchTrainer(SliceLoop, scaling, run).Fit();
  ASSERT_FALSE(result.error) << result.error->what() << "\n" << ReadFile(log_);
  EXPECT_EQ(result.metrics.at("world"), 2);
  EXPECT_EQ(result.metrics.at("worker_id_sum"), 1) << "TPU_WORKER_ID 0 and 1";
  EXPECT_EQ(result.metrics.at("slice_hosts"), 2);
  EXPECT_EQ(result.metrics.at("same_slice"), 1);
  EXPECT_EQ(NodesOfGroup("tpu"), 2) << "one whole slice: both hosts";
  std::string log = ReadFile(log_);
  EXPECT_NE(log.find("scale_up 1 of group tpu"), std::string::npos) << log;
  // Idle, the slice goes as a whole.
  EXPECT_TRUE(WaitFor([] { return NodesOfGroup("tpu") == 0; }, 30000)) << ReadFile(log_);
  EXPECT_TRUE(WaitFor([&] {  // logged once the provider has stopped both hosts
    return ReadFile(log_).find("scale_down 1 of group tpu: slice tpu-0") != std::string::npos;
  })) << ReadFile(log_);
}

TEST_F(AutoscalerTest, ABadConfigIsRefusedAtStartSayingWhatToChange) {
  // Every kind of bad config is in autoscaler_unit_test; here the command refuses one.
  auto [code, out] = RunCli("autoscaler --address " + cluster_.head_address() + " --config " +
                            WriteConfig("bad.yaml",
                                        "groups:\n  - name: t\n    tpu: "
                                        "{accelerator_type: v4-16, topology: "
                                        "2x2x2, hosts: 4}\n    max: 1\n"));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("has 2 host(s), not 4: set hosts: 2"), std::string::npos) << out;
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
