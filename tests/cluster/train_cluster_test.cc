// Orrery Train on a real cluster (tests/cluster/cluster_fixture.h): redis-server, an
// `orrery head` and `orrery node` daemons on loopback, this binary as the driver. The run's
// record and metrics stream in Redis (read back with hiredis), SPMD training on simulated
// TPU v4-16 hosts (fake sysroots, as in tpu_cluster_test.cc) in one slice and in two, a
// slice type no host offers, and the nccl environment on a simulated two-GPU host.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "orrery/train/train.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/cluster/redis_client.h"
#include "tests/integration/train_loop_checks.h"
#include "tests/skip_exit_code.h"

namespace fs = std::filesystem;
namespace train = orrery::train;
using nlohmann::json;
using orrery_cluster::WaitFor;
using ::testing::HasSubstr;

namespace {

using orrery_cluster::Redis;

// ------------------------------------------------------------------ loop helpers

using orrery_test::Env;
using orrery_test::Expect;
using orrery_test::Fail;

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep)) out.push_back(item);
  return out;
}

// ------------------------------------------------------------------ the train loops

// Three reports, a checkpoint (rank 0's) with the last.
void RecordLoop(train::Context& ctx) {
  for (int step = 1; step <= 3; ++step) {
    train::Metrics m{{"step", step}, {"loss", 1.0 / step}};
    if (step == 3 && ctx.WorldRank() == 0) {
      std::string dir = ctx.Config().at("scratch").get<std::string>();
      fs::create_directories(dir);
      std::ofstream(dir + "/model.txt") << step;
      ctx.Report(m, train::Checkpoint(dir));
    } else {
      ctx.Report(m);
    }
  }
}
ORRERY_REMOTE(RecordLoop);

// One SPMD process per TPU host: every rank checks what the xla_tpu backend and the node
// set for it (config: hosts per slice, slices, expected mesh shape), then rank 0 reports
// what it gathered.
void TpuLoop(train::Context& ctx) {
  const int rank = ctx.WorldRank();
  const int hosts = ctx.Config().at("hosts").get<int>();
  const int slices = ctx.Config().at("slices").get<int>();
  const auto mesh = ctx.Config().at("mesh").get<std::vector<int>>();
  const int chips = 4;
  Expect(ctx, ctx.WorldSize() == hosts * slices,
         "WorldSize() is " + std::to_string(ctx.WorldSize()));
  Expect(ctx, Env("ORRERY_TRAIN_BACKEND") == "xla_tpu",
         "ORRERY_TRAIN_BACKEND=" + Env("ORRERY_TRAIN_BACKEND"));
  Expect(ctx, Env("PJRT_DEVICE") == "TPU", "PJRT_DEVICE=" + Env("PJRT_DEVICE"));
  Expect(ctx, Env("XLA_USE_SPMD") == "1", "XLA_USE_SPMD=" + Env("XLA_USE_SPMD"));
  Expect(ctx, Env("TPU_WORKER_ID") == std::to_string(rank % hosts),
         "TPU_WORKER_ID=" + Env("TPU_WORKER_ID"));
  Expect(ctx, Env("RANK") == std::to_string(rank), "RANK=" + Env("RANK"));
  auto hostnames = Split(Env("TPU_WORKER_HOSTNAMES"), ',');
  Expect(ctx, int(hostnames.size()) == hosts,
         "TPU_WORKER_HOSTNAMES=" + Env("TPU_WORKER_HOSTNAMES"));
  Expect(ctx, Env("MASTER_ADDR") != "<unset>" && Env("MASTER_PORT") != "<unset>",
         "MASTER_ADDR/PORT unset");
  // The node gave this process all four chips of its host.
  auto visible = Split(Env("TPU_VISIBLE_CHIPS"), ',');
  Expect(ctx, visible == std::vector<std::string>({"0", "1", "2", "3"}),
         "TPU_VISIBLE_CHIPS=" + Env("TPU_VISIBLE_CHIPS"));
  if (slices > 1) {
    Expect(ctx, Env("MEGASCALE_NUM_SLICES") == std::to_string(slices),
           "MEGASCALE_NUM_SLICES=" + Env("MEGASCALE_NUM_SLICES"));
    Expect(ctx, Env("MEGASCALE_SLICE_ID") == std::to_string(rank / hosts),
           "MEGASCALE_SLICE_ID=" + Env("MEGASCALE_SLICE_ID"));
    Expect(ctx, Env("MEGASCALE_PORT") == "8081", "MEGASCALE_PORT=" + Env("MEGASCALE_PORT"));
    Expect(ctx, Env("MEGASCALE_COORDINATOR_ADDRESS") == Env("MASTER_ADDR"),
           "MEGASCALE_COORDINATOR_ADDRESS=" + Env("MEGASCALE_COORDINATOR_ADDRESS"));
  } else {
    Expect(ctx, Env("MEGASCALE_NUM_SLICES") == "<unset>", "MEGASCALE_NUM_SLICES set for one slice");
  }
  Expect(ctx, ctx.Device() == "xla:0", "Device() is " + ctx.Device());
  Expect(ctx, ctx.Mesh().shape == mesh, "Mesh().shape differs from the expected one");
  std::vector<int> local;
  for (int d = rank * chips; d < (rank + 1) * chips; ++d) local.push_back(d);
  Expect(ctx, ctx.Mesh().local_device_ids == local,
         "Mesh().local_device_ids are not this host's 4 chips");
  Expect(ctx, ctx.Mesh().device_ids.size() == size_t(hosts * slices * chips),
         "Mesh().device_ids has the wrong size");

  std::vector<int64_t> mine{rank, std::stoll(Env("TPU_WORKER_ID")),
                            slices > 1 ? std::stoll(Env("MEGASCALE_SLICE_ID")) : 0,
                            int64_t(ctx.Mesh().local_device_ids.size())};
  std::vector<int64_t> all = ctx.AllGather(mine);
  int64_t rank_mask = 0, chips_total = 0, slice_sum = 0;
  for (size_t i = 0; i + 3 < all.size(); i += 4) {
    rank_mask |= int64_t(1) << all[i];
    slice_sum += all[i + 2];
    chips_total += all[i + 3];
  }
  ctx.Report({{"world", ctx.WorldSize()},
              {"rank_mask", double(rank_mask)},
              {"chips_total", double(chips_total)},
              {"slice_sum", double(slice_sum)},
              {"hostnames", double(hostnames.size())},
              {"mesh_dims", double(ctx.Mesh().shape.size())}});
}
ORRERY_REMOTE(TpuLoop);

// Never runs here: the trainer fails before starting workers.
void UnreachableLoop(train::Context& ctx) { ctx.Report({{"ran", 1}}); }
ORRERY_REMOTE(UnreachableLoop);

// The nccl environment on a GPU host (no CUDA is used).
void GpuLoop(train::Context& ctx) {
  Expect(ctx, Env("ORRERY_TRAIN_BACKEND") == "nccl",
         "ORRERY_TRAIN_BACKEND=" + Env("ORRERY_TRAIN_BACKEND"));
  Expect(ctx, Env("CUDA_VISIBLE_DEVICES") == "0,1",
         "CUDA_VISIBLE_DEVICES=" + Env("CUDA_VISIBLE_DEVICES"));
  Expect(ctx, ctx.Device().rfind("cuda:", 0) == 0, "Device() is " + ctx.Device());
  int device = std::stoi(ctx.Device().substr(5));
  // The device index is this worker's own GPU within the visible list.
  auto own = orrery::GetRuntimeContext().GetAcceleratorIds();
  Expect(ctx, own.count("GPU") && own["GPU"].size() == 1,
         "the worker does not hold exactly one GPU");
  Expect(ctx, own["GPU"][0] == device,
         "Device() " + ctx.Device() + " is not the worker's GPU " + std::to_string(own["GPU"][0]));
  std::vector<int64_t> devices = ctx.AllGather(std::vector<int64_t>{device});
  int64_t mask = 0;
  for (int64_t d : devices) mask |= int64_t(1) << d;
  ctx.Report({{"device_mask", double(mask)}, {"world", ctx.WorldSize()}});
}
ORRERY_REMOTE(GpuLoop);

// Two workers that checkpoint every step. On the first attempt rank 1 writes its node's id
// to <run path>/doomed_node at step 3 and waits there for its node to be killed (or gives
// up after a deadline, failing the test instead of hanging it).
void NodeDeathLoop(train::Context& ctx) {
  int step = 0;
  if (auto ckpt = ctx.GetCheckpoint()) std::ifstream(ckpt->Path() + "/step") >> step;
  bool first_attempt = !ctx.GetCheckpoint().has_value();
  for (++step; step <= 6; ++step) {
    std::vector<int64_t> one{1};
    ctx.AllReduce(one);
    if (first_attempt && step == 3 && ctx.WorldRank() == 1) {
      // The node dies only once the trainer has kept a checkpoint of this attempt (the test
      // waits for the run's record to list one): a node killed before that would restart the
      // group from nothing, as a first attempt again.
      auto kept = [&] {
        for (const auto& e : fs::directory_iterator(ctx.RunPath()))
          if (e.path().filename().string().rfind("checkpoint_", 0) == 0) return true;
        return false;
      };
      auto wait_until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!kept() && std::chrono::steady_clock::now() < wait_until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (!kept()) Fail(ctx, "the trainer kept no checkpoint of steps 1 and 2");
      std::ofstream(ctx.RunPath() + "/doomed_node.tmp") << Env("ORRERY_NODE_ID");
      fs::rename(ctx.RunPath() + "/doomed_node.tmp", ctx.RunPath() + "/doomed_node");
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      Fail(ctx, "the node was not killed");
    }
    train::Metrics m{{"step", step}, {"resumed", first_attempt ? 0.0 : 1.0}};
    if (ctx.WorldRank() == 0) {
      std::string dir = ctx.RunPath() + "/tmp_ckpt";
      fs::create_directories(dir);
      std::ofstream(dir + "/step") << step;
      ctx.Report(m, train::Checkpoint(dir));
    } else {
      ctx.Report(m);
    }
  }
}
ORRERY_REMOTE(NodeDeathLoop);

// ------------------------------------------------------------------ Redis access

const std::string kPrefix = "orrery:default:";

// ------------------------------------------------------------------ the cluster

// One cluster for the suite: two v4-16 slices of two simulated hosts each (slice-a, slice-b),
// and a CPU node.
class TrainClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A test before this suite that stopped early (a failed ASSERT) left its runtime up.
    if (orrery::IsInitialized()) orrery::Shutdown();
    cluster_ = new orrery_cluster::Cluster();
    cluster_->StartHead(0.2, 3);
    for (const char* slice : {"slice-a", "slice-b"}) {
      for (int worker = 0; worker < 2; ++worker) {
        cluster_->AddTpuV4Node(slice, worker,
                               std::string("host=tpu-") + slice[6] + std::to_string(worker), 1);
      }
    }
    cluster_->AddCpuNode("host=cpu", 4);
    orrery::Config c;
    c.address = cluster_->head_address();
    c.infeasible_timeout_s = 1;
    orrery::Init(c);
    if (!WaitFor([] { return orrery::Nodes().size() == 5; }))
      throw std::runtime_error("the 5 nodes did not join");
  }
  static void TearDownTestSuite() {
    if (orrery::IsInitialized()) orrery::Shutdown();
    delete cluster_;
    cluster_ = nullptr;
  }
  void TearDown() override {
    // Fit() gives every chip and CPU back, pass or fail.
    EXPECT_TRUE(WaitFor([] { return orrery::AvailableResources() == orrery::ClusterResources(); }))
        << "resources still in use after Fit()";
    // And every worker process of the run has exited. The head returns a removed placement
    // group's resources at once, while the node hands a host's chips to a new worker only
    // once the old worker's process has exited (the node reports the actor DEAD then), so
    // the next test waits for that instead of racing it.
    Redis redis(cluster_->redis_address());
    std::string alive;
    EXPECT_TRUE(WaitFor([&] {
      alive.clear();
      for (const auto& [id, text] : redis.HGetAll(kPrefix + "actors")) {
        json a = json::parse(text, nullptr, false);
        if (a.is_object() && a.value("state", "") != "DEAD")
          alive += " " + id + " (" + a.value("class", "") + ")";
      }
      return alive.empty();
    })) << "actors still alive after Fit():"
        << alive;
  }

  static train::RunConfig Run(const std::string& name) {
    train::RunConfig run;
    run.name = name;
    run.storage_path = cluster_->dir() + "/results";
    run.verbose = 0;
    return run;
  }
  static train::ScalingConfig Tpu(int workers, const std::string& topology) {
    train::ScalingConfig s;
    s.num_workers = workers;
    s.use_tpu = true;
    s.topology = topology;
    s.accelerator_type = "TPU-V4";
    return s;
  }
  static std::string ErrorText(const train::Result& r) {
    return r.error ? r.error->what() : "(no error)";
  }

  // The run's record in Redis once it has `status`.
  static json RunRecord(const std::string& run_id, const std::string& status) {
    Redis redis(cluster_->redis_address());
    EXPECT_TRUE(redis.ok());
    json record;
    bool found = WaitFor([&] {
      record = json::parse(redis.HGet(kPrefix + "train_runs", run_id), nullptr, false);
      return record.is_object() && record.value("status", "") == status;
    });
    EXPECT_TRUE(found) << "no " << status << " record for run " << run_id << ": " << record.dump();
    return record;
  }

  // Label `key` of the node with this hex id.
  static std::string NodeLabel(const std::string& node_id, const std::string& key) {
    for (const auto& n : orrery::Nodes())
      if (n.node_id.Hex() == node_id) return n.labels.count(key) ? n.labels.at(key) : "";
    return "";
  }

  static orrery_cluster::Cluster* cluster_;
};

orrery_cluster::Cluster* TrainClusterTest::cluster_ = nullptr;

// ------------------------------------------------------------------ the tests

TEST_F(TrainClusterTest, TheRunsRecordAndMetricsStreamLandInRedis) {
  train::ScalingConfig s;
  s.num_workers = 2;
  train::TorchTrainer trainer(RecordLoop, s, Run("redis_run"), {},
                              {{"scratch", cluster_->dir() + "/scratch"}});
  train::Result result = trainer.Fit();
  ASSERT_FALSE(result.error) << ErrorText(result);
  ASSERT_EQ(result.metrics_history.size(), 3u);
  ASSERT_FALSE(result.run_id.empty());
  ASSERT_TRUE(result.checkpoint.has_value());

  json record = RunRecord(result.run_id, "FINISHED");
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record.value("id", ""), result.run_id);
  EXPECT_EQ(record.value("name", ""), "redis_run");
  EXPECT_EQ(record.value("iterations", -1), 3);
  EXPECT_EQ(record.value("num_failures", -1), 0);
  EXPECT_EQ(record.value("backend", ""), "gloo");
  EXPECT_EQ(record.value("path", ""), result.path);
  EXPECT_EQ(record.value("error", "?"), "");
  ASSERT_TRUE(record.contains("workers") && record["workers"].is_array());
  std::set<int> ranks;
  for (const auto& w : record["workers"]) {
    ranks.insert(w.at("rank").get<int>());
    EXPECT_FALSE(w.at("node_id").get<std::string>().empty());
    EXPECT_GT(w.at("pid").get<int>(), 0);
    EXPECT_EQ(w.at("device").get<std::string>(), "cpu");
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  ASSERT_TRUE(record.contains("latest_metrics"));
  EXPECT_EQ(record["latest_metrics"], json(result.metrics));
  ASSERT_TRUE(record.contains("checkpoints") && record["checkpoints"].is_array());
  ASSERT_EQ(record["checkpoints"].size(), 1u);
  EXPECT_EQ(record["checkpoints"][0].value("path", ""), result.checkpoint->Path());
  EXPECT_EQ(record["checkpoints"][0].value("iteration", -1), 3);

  // One stream entry per report, in order, each field a string.
  Redis redis(cluster_->redis_address());
  const std::string stream = kPrefix + "train:" + result.run_id + ":metrics";
  std::vector<std::map<std::string, std::string>> entries;
  EXPECT_TRUE(WaitFor([&] { return (entries = redis.XRange(stream)).size() >= 3; })) << stream;
  ASSERT_EQ(entries.size(), 3u) << "one entry per report";
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    std::set<std::string> fields;
    for (const auto& [k, v] : e) fields.insert(k);
    EXPECT_EQ(fields, (std::set<std::string>{"iteration", "time", "metrics", "checkpoint"}));
    EXPECT_EQ(e.at("iteration"), std::to_string(i + 1));
    EXPECT_GT(std::stod(e.at("time")), 1e9) << "wall-clock seconds";
    json metrics = json::parse(e.at("metrics"), nullptr, false);
    ASSERT_TRUE(metrics.is_object()) << e.at("metrics");
    EXPECT_EQ(metrics, json(result.metrics_history[i]));
    EXPECT_EQ(e.at("checkpoint"), i == 2 ? result.checkpoint->Path() : "");
  }
}

TEST_F(TrainClusterTest, OneTpuSliceRunsOneSpmdWorkerPerHostWithTheXlaEnvironment) {
  train::TorchTrainer trainer(TpuLoop, Tpu(2, "2x2x2"), Run("tpu_one_slice"), {},
                              {{"hosts", 2}, {"slices", 1}, {"mesh", {2, 2, 2}}});
  train::Result result = trainer.Fit();
  ASSERT_FALSE(result.error) << ErrorText(result);
  EXPECT_EQ(result.metrics.at("world"), 2);
  EXPECT_EQ(result.metrics.at("rank_mask"), 0b11);
  EXPECT_EQ(result.metrics.at("chips_total"), 8) << "the slice's 8 chips, 4 per worker";
  EXPECT_EQ(result.metrics.at("hostnames"), 2);
  EXPECT_EQ(result.metrics.at("mesh_dims"), 3);

  // Rank r ran on TPU worker r of one slice, rank 0 on the slice head.
  json record = RunRecord(result.run_id, "FINISHED");
  ASSERT_EQ(record["workers"].size(), 2u);
  std::set<std::string> slices;
  for (const auto& w : record["workers"]) {
    std::string node = w.at("node_id").get<std::string>();
    EXPECT_EQ(NodeLabel(node, "orrery.io/tpu-worker-id"), std::to_string(w.at("rank").get<int>()));
    EXPECT_EQ(w.at("device").get<std::string>(), "xla:0");
    slices.insert(NodeLabel(node, "orrery.io/tpu-slice-name"));
  }
  EXPECT_EQ(slices.size(), 1u) << "both workers on hosts of one slice";
  EXPECT_EQ(record.value("backend", ""), "xla_tpu");
}

// An Entrypoint on the slice (docs/train.md "Framework processes"): one process per host,
// each seeing the XLA/libtpu variables of its host and JAX's settings, consistent across
// the slice. The process only writes its environment to a file and exits 0.
TEST_F(TrainClusterTest, AnEntrypointOnATpuSliceSeesItsHostsTpuVariables) {
  std::string dir = cluster_->dir() + "/tpu_entrypoint";
  fs::create_directories(dir);
  train::Entrypoint e;
  e.argv = {"sh", "-c", "env > env_$RANK.txt"};
  e.working_dir = dir;
  train::TorchTrainer trainer(e, Tpu(2, "2x2x2"), Run("tpu_entrypoint"));
  train::Result result = trainer.Fit();
  ASSERT_FALSE(result.error) << ErrorText(result);
  std::map<int, std::map<std::string, std::string>> env;  // by rank
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream in(dir + "/env_" + std::to_string(rank) + ".txt");
    ASSERT_TRUE(in) << "rank " << rank << " wrote no environment";
    for (std::string line; std::getline(in, line);) {
      auto eq = line.find('=');
      if (eq != std::string::npos) env[rank][line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  json record = RunRecord(result.run_id, "FINISHED");
  ASSERT_EQ(record["workers"].size(), 2u);
  std::set<std::string> nodes;
  for (const auto& w : record["workers"]) {
    int rank = w.at("rank").get<int>();
    std::string node = w.at("node_id").get<std::string>();
    nodes.insert(node);
    auto& v = env[rank];
    EXPECT_EQ(v["PJRT_DEVICE"], "TPU");
    EXPECT_EQ(v["TPU_WORKER_ID"], NodeLabel(node, "orrery.io/tpu-worker-id")) << "rank " << rank;
    EXPECT_EQ(v["TPU_WORKER_HOSTNAMES"], env[0]["TPU_WORKER_HOSTNAMES"]) << "the same slice";
    EXPECT_FALSE(v["TPU_VISIBLE_CHIPS"].empty()) << "rank " << rank;
    EXPECT_EQ(v["XLA_USE_SPMD"], "1");
    EXPECT_EQ(v["JAX_NUM_PROCESSES"], "2");
    EXPECT_EQ(v["JAX_PROCESS_ID"], std::to_string(rank));
    EXPECT_EQ(v["JAX_COORDINATOR_ADDRESS"], env[0]["MASTER_ADDR"] + ":" + env[0]["MASTER_PORT"]);
    EXPECT_EQ(v["RANK"], std::to_string(rank));
    EXPECT_NE(v["ORRERY_TRAIN_SOCKET"], "");
  }
  EXPECT_EQ(nodes.size(), 2u) << "one process per host";
  EXPECT_NE(env[0]["TPU_WORKER_ID"], env[1]["TPU_WORKER_ID"]);
}

TEST_F(TrainClusterTest, TwoTpuSlicesGetMegascaleIdsPerSlice) {
  train::TorchTrainer trainer(TpuLoop, Tpu(4, "2x2x2"), Run("tpu_two_slices"), {},
                              {{"hosts", 2}, {"slices", 2}, {"mesh", {2, 2, 2, 2}}});
  train::Result result = trainer.Fit();
  ASSERT_FALSE(result.error) << ErrorText(result);
  EXPECT_EQ(result.metrics.at("world"), 4);
  EXPECT_EQ(result.metrics.at("rank_mask"), 0b1111);
  EXPECT_EQ(result.metrics.at("chips_total"), 16);
  EXPECT_EQ(result.metrics.at("slice_sum"), 2) << "ranks 2 and 3 are slice 1";
  EXPECT_EQ(result.metrics.at("mesh_dims"), 4) << "a leading slice axis";

  // Ranks 0-1 on one slice, 2-3 on the other, each by worker id.
  json record = RunRecord(result.run_id, "FINISHED");
  ASSERT_EQ(record["workers"].size(), 4u);
  std::map<int, std::string> slice_of;
  for (const auto& w : record["workers"]) {
    int rank = w.at("rank").get<int>();
    std::string node = w.at("node_id").get<std::string>();
    EXPECT_EQ(NodeLabel(node, "orrery.io/tpu-worker-id"), std::to_string(rank % 2));
    slice_of[rank] = NodeLabel(node, "orrery.io/tpu-slice-name");
  }
  EXPECT_EQ(slice_of[0], slice_of[1]);
  EXPECT_EQ(slice_of[2], slice_of[3]);
  EXPECT_NE(slice_of[0], slice_of[2]);
}

TEST_F(TrainClusterTest, ASliceTypeNoHostOffersIsAcceleratorNotAvailableAtOnce) {
  train::RunConfig run = Run("tpu_v4_32");
  run.reservation_timeout_s = 600;  // must not be waited for
  // 2x2x4 is a v4-32 slice (4 hosts); the cluster has v4-16 slices only.
  train::Result result = train::TorchTrainer(UnreachableLoop, Tpu(4, "2x2x4"), run).Fit();
  ASSERT_TRUE(result.error);
  EXPECT_STREQ(result.error->kind(), "AcceleratorNotAvailableError") << result.error->what();
  EXPECT_THAT(result.error->what(), HasSubstr("v4-32"));
  EXPECT_THAT(result.error->what(), HasSubstr("v4-16"));
  EXPECT_THAT(result.error->what(), HasSubstr("slice-a"));
  EXPECT_THROW(result.ThrowIfError(), orrery::AcceleratorNotAvailableError);
  EXPECT_TRUE(result.metrics_history.empty());
  json record = RunRecord(result.run_id, "ERRORED");
  EXPECT_EQ(record.value("error_kind", ""), "AcceleratorNotAvailableError");
}

TEST(TrainGpuClusterTest, TwoGpuWorkersGetTheNcclEnvironmentAndOneDeviceEach) {
  orrery_cluster::Cluster cluster;
  cluster.StartHead(0.2, 3);
  cluster.AddTwoGpuNode("host=gpu", 2);
  orrery::Config c;
  c.address = cluster.head_address();
  orrery::Init(c);
  ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == 1; }));
  ASSERT_EQ(orrery::Nodes()[0].total.at("GPU"), 2);

  train::ScalingConfig s;
  s.num_workers = 2;
  s.use_gpu = true;
  train::RunConfig run;
  run.name = "gpu_run";
  run.storage_path = cluster.dir() + "/results";
  run.verbose = 0;
  train::Result result = train::TorchTrainer(GpuLoop, s, run).Fit();
  EXPECT_FALSE(result.error) << (result.error ? result.error->what() : "");
  if (!result.error) {
    EXPECT_EQ(result.metrics.at("world"), 2);
    EXPECT_EQ(result.metrics.at("device_mask"), 0b11) << "one worker on cuda:0, one on cuda:1";
  }
  EXPECT_TRUE(WaitFor([] { return orrery::AvailableResources() == orrery::ClusterResources(); }))
      << "the GPUs were not given back";
  orrery::Shutdown();
}

TEST(TrainNodeDeathTest, ANodeKilledMidRunRestartsTheGroupOnTheOthersFromTheCheckpoint) {
  orrery_cluster::Cluster cluster;
  cluster.StartHead(0.2, 3);
  std::map<std::string, int> pid_of_host;
  for (int i = 0; i < 3; ++i)
    pid_of_host["n" + std::to_string(i)] = cluster.AddNode("", "host=n" + std::to_string(i), 1);
  orrery::Config c;
  c.address = cluster.head_address();
  orrery::Init(c);
  ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == 3; }));

  train::ScalingConfig s;
  s.num_workers = 2;
  s.placement_strategy = "STRICT_SPREAD";
  train::RunConfig run;
  run.name = "node_death";
  run.storage_path = cluster.dir() + "/results";
  run.verbose = 0;
  run.failure_config.max_failures = 1;
  train::TorchConfig torch;
  torch.timeout_s = 60;
  train::Result result;
  std::thread fit([&] { result = train::TorchTrainer(NodeDeathLoop, s, run, torch).Fit(); });

  // Kill -9 the node that rank 1 runs on, once it says where it is and the trainer has kept
  // a checkpoint (the run's record lists it). Rank 0 writes a checkpoint's directory when it
  // reports, before the trainer has fetched rank 1's report of that step: on a busy machine
  // a node killed then restarted the group from nothing, as a first attempt whose rank 1
  // waited again to be killed (rank 0's next all-reduce timed out after 60 s).
  std::string marker = cluster.dir() + "/results/node_death/doomed_node";
  bool marked = WaitFor([&] { return fs::exists(marker); }, 60000);
  Redis redis(cluster.redis_address());
  EXPECT_TRUE(WaitFor(
      [&] {
        for (const auto& [id, text] : redis.HGetAll(kPrefix + "train_runs")) {
          auto record = json::parse(text, nullptr, false);
          if (record.is_object() && record.contains("checkpoints") &&
              record["checkpoints"].is_array() && !record["checkpoints"].empty())
            return true;
        }
        return false;
      },
      30000))
      << "the trainer kept no checkpoint";
  std::string node_id;
  if (marked) std::ifstream(marker) >> node_id;
  int pid = -1;
  for (const auto& n : orrery::Nodes()) {
    if (n.node_id.Hex() == node_id) pid = pid_of_host[n.labels.at("host")];
  }
  EXPECT_GT(pid, 0) << "no node has the id " << node_id;
  if (pid > 0) orrery_cluster::KillHard(pid);
  fit.join();

  ASSERT_FALSE(result.error) << result.error->what();
  EXPECT_EQ(result.num_failures, 1);
  EXPECT_EQ(result.metrics.at("step"), 6);
  EXPECT_EQ(result.metrics.at("resumed"), 1) << "the last report came from the restarted group";
  ASSERT_TRUE(result.checkpoint.has_value());
  int step = 0;
  std::ifstream(result.checkpoint->Path() + "/step") >> step;
  EXPECT_EQ(step, 6);
  orrery::Shutdown();
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
