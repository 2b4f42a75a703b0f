// Orrery Train on the embedded default cluster (docs/train.md): TorchTrainer::Fit()
// with real worker processes (each re-runs this binary and finds the loops below by their
// ORRERY_REMOTE names). Ranks and the backend's environment, the loop's config and the
// report history, checkpoint retention on disk, restarts after a worker is killed (SIGKILL),
// failures that must not restart, reservation timeouts, infeasible and invalid configs, and
// the collectives between worker processes.
//
// The driver sees rank 0's metrics only, so a loop checks what every rank sees itself (and
// throws, failing the run with its message) or gathers it and lets rank 0 report a summary.
#include "orrery/train/train.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_support.h"
#include "tests/fakes/temp_dir.h"
#include "tests/integration/train_loop_checks.h"

namespace fs = std::filesystem;
namespace train = orrery::train;

namespace {

using orrery_test::kTestCpus;
using orrery_test::ResourceOr0;
using orrery_test::WaitFor;
using ::testing::HasSubstr;

// ------------------------------------------------------------------ loop helpers

using orrery_test::Env;
using orrery_test::Expect;
using orrery_test::Fail;

int64_t EnvInt(const train::Context& ctx, const char* name) {
  std::string v = Env(name);
  try {
    size_t used = 0;
    long long x = std::stoll(v, &used);
    if (used != v.size()) throw std::invalid_argument(v);
    return x;
  } catch (const std::exception&) {
    Fail(ctx, std::string(name) + "=\"" + v + "\" is not an integer");
  }
}

// Rank 0 writes `files` into its own scratch directory and reports it as the checkpoint.
train::Checkpoint WriteCheckpoint(const std::string& dir,
                                  const std::map<std::string, std::string>& files) {
  fs::create_directories(dir);
  for (const auto& [name, content] : files)
    std::ofstream(dir + "/" + name, std::ios::trunc) << content;
  return train::Checkpoint(dir);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return s;
}

// The checkpoint_* directories under a run's path.
std::set<std::string> CheckpointDirs(const std::string& run_path) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_path, ec)) {
    std::string name = e.path().filename().string();
    if (e.is_directory() && name.rfind("checkpoint_", 0) == 0) out.insert(name);
  }
  return out;
}

// ------------------------------------------------------------------ the train loops

// Every rank checks its ranks, device, mesh and the gloo environment against each other,
// then rank 0 reports what it gathered from all ranks.
void RankEnvLoop(train::Context& ctx) {
  const int rank = ctx.WorldRank(), world = ctx.WorldSize();
  Expect(ctx, ctx.Config().is_null(),
         "Config() is not null without a train_loop_config: " + ctx.Config().dump());
  Expect(ctx, EnvInt(ctx, "RANK") == rank, "RANK=" + Env("RANK"));
  Expect(ctx, EnvInt(ctx, "WORLD_SIZE") == world, "WORLD_SIZE=" + Env("WORLD_SIZE"));
  Expect(ctx, EnvInt(ctx, "LOCAL_RANK") == ctx.LocalRank(), "LOCAL_RANK=" + Env("LOCAL_RANK"));
  Expect(ctx, EnvInt(ctx, "LOCAL_WORLD_SIZE") == ctx.LocalWorldSize(),
         "LOCAL_WORLD_SIZE=" + Env("LOCAL_WORLD_SIZE"));
  Expect(ctx, EnvInt(ctx, "NODE_RANK") == ctx.NodeRank(), "NODE_RANK=" + Env("NODE_RANK"));
  Expect(ctx, Env("MASTER_ADDR") == "127.0.0.1", "MASTER_ADDR=" + Env("MASTER_ADDR"));
  int64_t port = EnvInt(ctx, "MASTER_PORT");
  Expect(ctx, port > 0 && port < 65536, "MASTER_PORT=" + Env("MASTER_PORT"));
  Expect(ctx, Env("ORRERY_TRAIN_BACKEND") == "gloo",
         "ORRERY_TRAIN_BACKEND=" + Env("ORRERY_TRAIN_BACKEND"));
  Expect(ctx,
         ctx.Environment().count("RANK") && ctx.Environment().at("RANK") == std::to_string(rank),
         "Environment() lacks RANK or disagrees with the process environment");
  Expect(ctx, ctx.Device() == "cpu", "Device() is " + ctx.Device());
  Expect(ctx, ctx.Mesh().shape == std::vector<int>{world}, "Mesh().shape is not {world size}");
  Expect(ctx, ctx.Mesh().local_device_ids == std::vector<int>{rank},
         "Mesh().local_device_ids is not {rank}");
  // One node: local ranks are the world ranks.
  Expect(ctx, ctx.NodeRank() == 0 && ctx.LocalRank() == rank && ctx.LocalWorldSize() == world,
         "local/node ranks on the one embedded node are wrong");

  std::vector<int64_t> mine{rank, ctx.LocalRank(), ctx.NodeRank(), port, int64_t(::getpid())};
  std::vector<int64_t> all = ctx.AllGather(mine);
  Expect(ctx, all.size() == mine.size() * size_t(world),
         "AllGather returned " + std::to_string(all.size()) + " values");
  int64_t rank_mask = 0, rank_count = 0;
  bool ports_agree = true, gathered_in_order = true;
  std::set<int64_t> pids;
  for (int r = 0; r < world; ++r) {
    const int64_t* w = &all[size_t(r) * mine.size()];
    rank_mask |= int64_t(1) << w[0];
    ++rank_count;
    gathered_in_order = gathered_in_order && w[0] == r;
    ports_agree = ports_agree && w[3] == port;
    pids.insert(w[4]);
  }
  ctx.Report({{"world", world},
              {"rank_mask", double(rank_mask)},
              {"rank_count", double(rank_count)},
              {"in_order", gathered_in_order ? 1 : 0},
              {"ports_agree", ports_agree ? 1 : 0},
              {"processes", double(pids.size())}});
}
ORRERY_REMOTE(RankEnvLoop);

// Reports config["steps"] times, echoing the config's values.
void ConfigLoop(train::Context& ctx) {
  const auto& c = ctx.Config();
  Expect(ctx, c.is_object(), "Config() is not the object given: " + c.dump());
  int steps = c.at("steps").get<int>();
  double lr = c.at("lr").get<double>();
  std::string tag = c.at("tag").get<std::string>();
  Expect(ctx, c.at("nested").at("list") == nlohmann::json({1, 2, 3}),
         "the nested config did not arrive");
  for (int step = 1; step <= steps; ++step) {
    ctx.Report({{"step", step},
                {"lr", lr},
                {"tag_length", double(tag.size())},
                {"rank", ctx.WorldRank()},
                {"loss", 1.0 / step}});
  }
}
ORRERY_REMOTE(ConfigLoop);

// Every report carries a checkpoint (rank 0 and rank 1 each add a file of their own) and a
// loss from config["losses"].
void CheckpointLoop(train::Context& ctx) {
  auto losses = ctx.Config().at("losses").get<std::vector<double>>();
  std::string scratch =
      ctx.Config().at("scratch").get<std::string>() + "/rank" + std::to_string(ctx.WorldRank());
  for (size_t i = 0; i < losses.size(); ++i) {
    int step = int(i) + 1;
    train::Metrics m{{"step", step}, {"loss", losses[i]}};
    if (ctx.WorldRank() <= 1) {
      ctx.Report(m, WriteCheckpoint(scratch, {{"rank" + std::to_string(ctx.WorldRank()) + ".txt",
                                               std::to_string(step)}}));
    } else {
      ctx.Report(m);
    }
  }
}
ORRERY_REMOTE(CheckpointLoop);

// Fault tolerance: config["steps"] steps, a checkpoint (rank 0's step.txt) every 2 steps,
// resuming from GetCheckpoint(). On the first attempt (no checkpoint yet) rank 1 kills
// its own process at step 5, once the driver has taken in the step-4 checkpoint (with
// num_to_keep = 1 that is when step 2's directory has been evicted and step 4's is the
// only one), so the restart provably resumes from step 4.
void ResumeLoop(train::Context& ctx) {
  const int steps = ctx.Config().at("steps").get<int>();
  const int kill_at = ctx.Config().at("kill_at").get<int>();
  std::string scratch =
      ctx.Config().at("scratch").get<std::string>() + "/rank" + std::to_string(ctx.WorldRank());
  int start = 0;
  auto ckpt = ctx.GetCheckpoint();
  const bool first_attempt = !ckpt.has_value();
  if (ckpt) {
    std::string text = ReadFile(ckpt->Path() + "/step.txt");
    Expect(ctx, !text.empty(), "the checkpoint " + ckpt->Path() + " has no step.txt");
    start = std::stoi(text);
  }
  for (int step = start + 1; step <= steps; ++step) {
    // Keep the workers in step, as a real data-parallel loop would.
    std::vector<int64_t> v{step};
    ctx.AllReduce(v);
    Expect(ctx, v[0] == int64_t(step) * ctx.WorldSize(),
           "the step AllReduce gave " + std::to_string(v[0]));
    if (first_attempt && ctx.WorldRank() == 1 && step == kill_at) {
      std::string want = std::to_string(kill_at - 1);
      bool taken = WaitFor([&] {
        auto dirs = CheckpointDirs(ctx.RunPath());
        return dirs.size() == 1 &&
               ReadFile(ctx.RunPath() + "/" + *dirs.begin() + "/step.txt") == want;
      });
      Expect(ctx, taken,
             "the driver never kept only the step-" + want + " checkpoint (num_to_keep=1)");
      raise(SIGKILL);
    }
    train::Metrics m{{"step", step},
                     {"start", start},
                     {"attempt", first_attempt ? 0 : 1},
                     {"checkpointed", step % 2 == 0 ? 1 : 0}};
    if (step % 2 == 0 && ctx.WorldRank() == 0) {
      ctx.Report(m, WriteCheckpoint(scratch, {{"step.txt", std::to_string(step)}}));
    } else {
      ctx.Report(m);
    }
  }
}
ORRERY_REMOTE(ResumeLoop);

// config["victim"] kills its own process on every attempt, once every worker has started.
void AlwaysDieLoop(train::Context& ctx) {
  ctx.Report({{"step", 1}});
  ctx.Barrier();
  if (ctx.WorldRank() == ctx.Config().at("victim").get<int>()) raise(SIGKILL);
  ctx.Barrier();  // the others wait here for the victim, until the trainer stops them
}
ORRERY_REMOTE(AlwaysDieLoop);

// Rank 2 throws; the others wait in a collective that never completes.
void ThrowingLoop(train::Context& ctx) {
  ctx.Report({{"step", 1}});
  ctx.Barrier();
  if (ctx.WorldRank() == 2) throw std::runtime_error("boom on rank 2");
  ctx.Barrier();
}
ORRERY_REMOTE(ThrowingLoop);

// Not registered with ORRERY_REMOTE: a trainer cannot be made with it.
void UnregisteredLoop(train::Context& ctx) { ctx.Report({{"ran", 1}}); }

// Never runs in these tests (the reservation fails first); if it does, the run finishes.
void NeverStartedLoop(train::Context& ctx) { ctx.Report({{"ran", 1}}); }
ORRERY_REMOTE(NeverStartedLoop);

// The collectives across worker processes, each compared with the serial result computed
// from every rank's known input.
void CollectivesLoop(train::Context& ctx) {
  const int r = ctx.WorldRank(), w = ctx.WorldSize();
  int checks = 0;

  // A 1M-element double vector goes round the ring. The values are integers, so every
  // summation order gives the exact serial result.
  const size_t n = size_t(1) << 20;
  auto input = [&](int rank, size_t i) { return double((rank + 1) * int64_t(i % 1024) + rank); };
  std::vector<double> big(n);
  for (size_t i = 0; i < n; ++i) big[i] = input(r, i);
  std::vector<double> big_max = big, big_avg = big;
  ctx.AllReduce(big);
  for (size_t i = 0; i < n; ++i) {
    double want = 0;
    for (int q = 0; q < w; ++q) want += input(q, i);
    if (big[i] != want)
      Fail(ctx, "ring AllReduce(sum)[" + std::to_string(i) + "] = " + std::to_string(big[i]) +
                    ", serial " + std::to_string(want));
  }
  ++checks;
  ctx.AllReduce(big_max, train::ReduceOp::kMax);
  for (size_t i = 0; i < n; ++i) {
    if (big_max[i] != input(w - 1, i))
      Fail(ctx, "ring AllReduce(max)[" + std::to_string(i) + "] is wrong");
  }
  ++checks;
  ctx.AllReduce(big_avg, train::ReduceOp::kAvg);
  for (size_t i = 0; i < n; ++i) {
    double want = 0;
    for (int q = 0; q < w; ++q) want += input(q, i);
    if (big_avg[i] != want / w)
      Fail(ctx, "ring AllReduce(avg)[" + std::to_string(i) + "] is wrong");
  }
  ++checks;

  // A large float vector (ring, another element type).
  std::vector<float> floats(300000);
  for (size_t i = 0; i < floats.size(); ++i) floats[i] = float(r * 3 + int(i % 7));
  ctx.AllReduce(floats);
  for (size_t i = 0; i < floats.size(); ++i) {
    float want = 0;
    for (int q = 0; q < w; ++q) want += float(q * 3 + int(i % 7));
    if (floats[i] != want) Fail(ctx, "float AllReduce[" + std::to_string(i) + "] is wrong");
  }
  ++checks;

  // Small int64 vectors (the direct path), with values a double could not hold exactly.
  const int64_t big_int = (int64_t(1) << 53) + 1;
  std::vector<int64_t> small{big_int + r, -r, int64_t(r) * r, 7};
  ctx.AllReduce(small);
  int64_t sum_r = 0, sum_r2 = 0;
  for (int q = 0; q < w; ++q) sum_r += q, sum_r2 += int64_t(q) * q;
  std::vector<int64_t> want_small{big_int * w + sum_r, -sum_r, sum_r2, 7 * int64_t(w)};
  Expect(ctx, small == want_small, "int64 AllReduce(sum) is wrong");
  ++checks;
  std::vector<int64_t> prod{r + 1, 2};
  ctx.AllReduce(prod, train::ReduceOp::kProduct);
  int64_t factorial = 1;
  for (int q = 1; q <= w; ++q) factorial *= q;
  Expect(ctx, prod == std::vector<int64_t>({factorial, int64_t(1) << w}),
         "int64 AllReduce(product) is wrong");
  ++checks;
  std::vector<int32_t> mins{r, -r, 5};
  ctx.AllReduce(mins, train::ReduceOp::kMin);
  Expect(ctx, mins == std::vector<int32_t>({0, -(w - 1), 5}), "int32 AllReduce(min) is wrong");
  ++checks;

  // AllGather: rank q contributes q + 1 copies of q; every rank gets them in rank order.
  std::vector<int32_t> gathered = ctx.AllGather(std::vector<int32_t>(size_t(r + 1), r));
  std::vector<int32_t> want_gathered;
  for (int q = 0; q < w; ++q) want_gathered.insert(want_gathered.end(), size_t(q + 1), q);
  Expect(ctx, gathered == want_gathered, "AllGather of uneven vectors is wrong");
  ++checks;

  // Broadcast from the last rank: the others' vectors take the root's length and values.
  std::vector<double> b =
      r == w - 1 ? std::vector<double>{10, 20, 30, 40, 50.5} : std::vector<double>{-1};
  ctx.Broadcast(b, w - 1);
  Expect(ctx, b == std::vector<double>({10, 20, 30, 40, 50.5}),
         "Broadcast from the last rank is wrong");
  ++checks;
  // A large broadcast from rank 0.
  std::vector<double> lb(n / 4, 0.0);
  if (r == 0)
    for (size_t i = 0; i < lb.size(); ++i) lb[i] = double(i) * 0.5;
  ctx.Broadcast(lb, 0);
  for (size_t i = 0; i < lb.size(); ++i)
    if (lb[i] != double(i) * 0.5) Fail(ctx, "large Broadcast[" + std::to_string(i) + "] is wrong");
  ++checks;

  ctx.Barrier();
  // Every rank ran every check: gather the counts.
  std::vector<int64_t> counts = ctx.AllGather(std::vector<int64_t>{checks});
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  ctx.Report({{"checks", checks}, {"total_checks", double(total)}});
}
ORRERY_REMOTE(CollectivesLoop);

// ------------------------------------------------------------------ the fixture

double AvailableCpu() { return ResourceOr0(orrery::AvailableResources(), "CPU"); }

class TrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty()) << "mkdtemp failed";
    ASSERT_TRUE(WaitFor([] { return AvailableCpu() == kTestCpus; }))
        << "CPUs still in use before the test: " << AvailableCpu();
  }
  void TearDown() override {
    // Whatever happened, Fit() stops its workers and releases its reservation.
    EXPECT_TRUE(WaitFor([] { return AvailableCpu() == kTestCpus; }))
        << "the trainer left CPUs in use: " << AvailableCpu() << " of " << kTestCpus
        << " available";
  }

  train::RunConfig Run(const std::string& name) const {
    train::RunConfig run;
    run.name = name;
    run.storage_path = dir_.path() + "/results";
    run.verbose = 0;
    return run;
  }
  static train::ScalingConfig Cpus(int workers) {
    train::ScalingConfig s;
    s.num_workers = workers;
    return s;
  }
  static std::string ErrorText(const train::Result& r) {
    return r.error ? r.error->what() : "(no error)";
  }

  orrery::testing::TempDir dir_{"orrery_train_test"};
};

// ------------------------------------------------------------------ the tests

TEST_F(TrainTest, FourCpuWorkersGetDistinctRanksAndTheGlooEnvironment) {
  train::TorchTrainer trainer(RankEnvLoop, Cpus(4), Run("ranks"));
  train::Result result = trainer.Fit();
  ASSERT_FALSE(result.error) << ErrorText(result);
  ASSERT_EQ(result.metrics_history.size(), 1u);
  EXPECT_EQ(result.metrics.at("world"), 4);
  EXPECT_EQ(result.metrics.at("rank_count"), 4);
  EXPECT_EQ(result.metrics.at("rank_mask"), 0b1111) << "ranks 0..3 must each appear once";
  EXPECT_EQ(result.metrics.at("in_order"), 1) << "AllGather must return the vectors in rank order";
  EXPECT_EQ(result.metrics.at("ports_agree"), 1) << "every worker must see the same MASTER_PORT";
  EXPECT_EQ(result.metrics.at("processes"), 4) << "each worker is a process of its own";
  EXPECT_EQ(result.num_failures, 0);
  EXPECT_FALSE(result.checkpoint.has_value());
  EXPECT_FALSE(result.run_id.empty());
  EXPECT_EQ(result.path, dir_.path() + "/results/ranks");
}

TEST_F(TrainTest, LoopConfigReachesEveryWorkerAndEveryReportIsKeptInOrder) {
  nlohmann::json config{
      {"steps", 5}, {"lr", 0.25}, {"tag", "seven77"}, {"nested", {{"list", {1, 2, 3}}}}};
  train::TorchTrainer trainer(ConfigLoop, Cpus(2), Run("config"), {}, config);
  train::Result result = trainer.Fit();
  ASSERT_FALSE(result.error) << ErrorText(result);
  ASSERT_EQ(result.metrics_history.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    const auto& m = result.metrics_history[i];
    EXPECT_EQ(m.at("step"), double(i + 1));
    EXPECT_EQ(m.at("lr"), 0.25);
    EXPECT_EQ(m.at("tag_length"), 7);
    EXPECT_EQ(m.at("rank"), 0) << "the driver keeps rank 0's metrics";
  }
  EXPECT_EQ(result.metrics, result.metrics_history.back());
  EXPECT_EQ(result.metrics.at("step"), 5);

  EXPECT_THROW(train::TorchTrainer(UnregisteredLoop, Cpus(1), Run("unregistered")),
               orrery::FunctionNotFoundError);
}

TEST_F(TrainTest, CheckpointsKeepTheBestByScoreAndTheLatestOnDisk) {
  train::RunConfig run = Run("ckpt");
  run.checkpoint_config.num_to_keep = 2;
  run.checkpoint_config.score_attribute = "loss";
  run.checkpoint_config.order = "min";
  // Best by loss: step 2 (1.0), then step 4 (2.0); step 6 stays as the latest.
  std::vector<double> losses{5.0, 1.0, 4.0, 2.0, 3.0, 6.0};
  train::TorchTrainer trainer(CheckpointLoop, Cpus(3), run, {},
                              {{"losses", losses}, {"scratch", dir_.path() + "/scratch"}});
  train::Result result = trainer.Fit();
  ASSERT_FALSE(result.error) << ErrorText(result);
  ASSERT_EQ(result.metrics_history.size(), 6u);
  const std::string run_path = dir_.path() + "/results/ckpt";
  EXPECT_EQ(result.path, run_path);

  // best_checkpoints: best first, each with the metrics reported with it.
  ASSERT_EQ(result.best_checkpoints.size(), 3u);
  std::vector<double> steps;
  for (const auto& [ckpt, metrics] : result.best_checkpoints) steps.push_back(metrics.at("step"));
  EXPECT_EQ(steps, (std::vector<double>{2, 4, 6}));
  EXPECT_EQ(result.best_checkpoints[0].second.at("loss"), 1.0);
  EXPECT_EQ(result.best_checkpoints[1].second.at("loss"), 2.0);

  // Result.checkpoint is the latest.
  ASSERT_TRUE(result.checkpoint.has_value());
  EXPECT_EQ(result.checkpoint->Path(), result.best_checkpoints[2].first.Path());

  // Exactly the kept directories exist: <storage_path>/<name>/checkpoint_<iteration>, each
  // holding the files of both ranks that passed one, from that step.
  std::set<std::string> kept;
  for (const auto& [ckpt, metrics] : result.best_checkpoints) {
    fs::path p(ckpt.Path());
    EXPECT_EQ(p.parent_path().string(), run_path);
    std::string name = p.filename().string();
    ASSERT_EQ(name.rfind("checkpoint_", 0), 0u) << name;
    EXPECT_EQ(std::stoi(name.substr(11)), int(metrics.at("step")))
        << "a checkpoint directory is named by its iteration";
    kept.insert(name);
    std::string step = std::to_string(int(metrics.at("step")));
    EXPECT_EQ(ReadFile(ckpt.Path() + "/rank0.txt"), step) << ckpt.Path();
    EXPECT_EQ(ReadFile(ckpt.Path() + "/rank1.txt"), step) << ckpt.Path();
  }
  EXPECT_EQ(CheckpointDirs(run_path), kept)
      << "evicted checkpoints must be deleted, kept ones must stay";
}

TEST_F(TrainTest, AKilledWorkerRestartsTheGroupFromTheLatestCheckpoint) {
  train::RunConfig run = Run("resume");
  run.failure_config.max_failures = 2;
  run.checkpoint_config.num_to_keep = 1;
  train::TorchTrainer trainer(
      ResumeLoop, Cpus(2), run, {},
      {{"steps", 10}, {"kill_at", 5}, {"scratch", dir_.path() + "/scratch"}});
  train::Result result = trainer.Fit();
  ASSERT_FALSE(result.error) << ErrorText(result);
  EXPECT_EQ(result.num_failures, 1);
  EXPECT_EQ(result.metrics.at("step"), 10);
  EXPECT_EQ(result.metrics.at("attempt"), 1);
  EXPECT_EQ(result.metrics.at("start"), 4)
      << "the second attempt resumes from the step-4 checkpoint";
  // Steps 1-4 from the first attempt (its step 5 never completed), 5-10 from the second.
  ASSERT_EQ(result.metrics_history.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    const auto& m = result.metrics_history[i];
    EXPECT_EQ(m.at("step"), double(i + 1));
    EXPECT_EQ(m.at("attempt"), i < 4 ? 0 : 1) << "report " << i;
    EXPECT_EQ(m.at("start"), i < 4 ? 0 : 4) << "report " << i;
  }
  ASSERT_TRUE(result.checkpoint.has_value());
  EXPECT_EQ(ReadFile(result.checkpoint->Path() + "/step.txt"), "10");
  EXPECT_EQ(CheckpointDirs(result.path).size(), 1u) << "num_to_keep = 1";
}

TEST_F(TrainTest, AWorkerDyingMoreOftenThanMaxFailuresFailsTheRunNamingIt) {
  train::RunConfig run = Run("always_dies");
  run.failure_config.max_failures = 1;
  train::TorchTrainer trainer(AlwaysDieLoop, Cpus(3), run, {}, {{"victim", 1}});
  train::Result result = trainer.Fit();
  ASSERT_TRUE(result.error) << "the run must fail";
  EXPECT_STREQ(result.error->kind(), "TrainingFailedError");
  std::string node = orrery::Nodes().at(0).node_id.Hex().substr(0, 12);
  EXPECT_THAT(result.error->what(), HasSubstr("rank 1"));
  EXPECT_THAT(result.error->what(), HasSubstr(node)) << "the message names the node";
  EXPECT_THAT(result.error->what(), HasSubstr("died"));
  EXPECT_THAT(result.error->what(), HasSubstr("max_failures=1"));
  EXPECT_EQ(result.num_failures, 2) << "one restart allowed, then the second failure ends the run";
  EXPECT_THROW(result.ThrowIfError(), orrery::TrainingFailedError);
}

TEST_F(TrainTest, AnExceptionInTheLoopFailsTheRunWithoutARestart) {
  train::RunConfig run = Run("throws");
  run.failure_config.max_failures = 3;
  train::TorchTrainer trainer(ThrowingLoop, Cpus(4), run);
  train::Result result = trainer.Fit();
  ASSERT_TRUE(result.error) << "the run must fail";
  EXPECT_STREQ(result.error->kind(), "TrainingFailedError");
  EXPECT_THAT(result.error->what(), HasSubstr("boom on rank 2"));
  EXPECT_THAT(result.error->what(), HasSubstr("rank 2"));
  EXPECT_THAT(result.error->what(), HasSubstr("runtime_error"));
  EXPECT_EQ(result.num_failures, 0) << "a loop exception is not a worker failure: no restart";
  EXPECT_THROW(result.ThrowIfError(), orrery::TrainingFailedError);
}

TEST_F(TrainTest, ReservationTimeoutIsAPlacementGroupErrorAndReleasesEverything) {
  // Take all but 3 CPUs, so the 4 workers cannot be reserved.
  orrery::PlacementGroup mine =
      orrery::CreatePlacementGroup({.name = "train_test_hog",
                                    .bundles = {{{"CPU", kTestCpus - 3}}},
                                    .strategy = orrery::PlacementStrategy::PACK});
  ASSERT_TRUE(mine.Wait(30));
  ASSERT_TRUE(WaitFor([] { return AvailableCpu() == 3; })) << AvailableCpu();

  train::RunConfig run = Run("starved");
  run.reservation_timeout_s = 1;
  train::Result result = train::TorchTrainer(NeverStartedLoop, Cpus(4), run).Fit();
  ASSERT_TRUE(result.error) << "the reservation cannot succeed";
  EXPECT_STREQ(result.error->kind(), "PlacementGroupError") << result.error->what();
  EXPECT_THAT(result.error->what(), HasSubstr("reservation_timeout_s"));
  EXPECT_THROW(result.ThrowIfError(), orrery::PlacementGroupError);
  EXPECT_TRUE(result.metrics_history.empty());

  // The environment variable is the default when the RunConfig leaves it unset.
  setenv("TRAIN_PLACEMENT_GROUP_TIMEOUT_S", "1", 1);
  train::Result from_env = train::TorchTrainer(NeverStartedLoop, Cpus(4), Run("starved_env")).Fit();
  setenv("TRAIN_PLACEMENT_GROUP_TIMEOUT_S", "soon", 1);
  EXPECT_THROW(train::TorchTrainer(NeverStartedLoop, Cpus(4), Run("bad_env")).Fit(),
               orrery::ConfigError);
  unsetenv("TRAIN_PLACEMENT_GROUP_TIMEOUT_S");
  ASSERT_TRUE(from_env.error);
  EXPECT_STREQ(from_env.error->kind(), "PlacementGroupError") << from_env.error->what();
  EXPECT_THAT(from_env.error->what(), HasSubstr("within 1 s"));

  // With our own group gone, every CPU comes back: the trainer reserved nothing that stayed.
  orrery::RemovePlacementGroup(mine.Id());
  EXPECT_TRUE(WaitFor([] { return AvailableCpu() == kTestCpus; }))
      << "CPUs still reserved after the failed reservations: " << AvailableCpu();
  EXPECT_TRUE(WaitFor([] { return orrery::AvailableResources() == orrery::ClusterResources(); }));
}

TEST_F(TrainTest, InfeasibleWorkersFailAtOnceAndBadConfigsThrowBeforeReserving) {
  train::ScalingConfig huge = Cpus(2);
  huge.resources_per_worker = {{"CPU", 1000}};
  train::RunConfig run = Run("huge");
  run.reservation_timeout_s = 600;  // an infeasible demand must not wait for this
  train::Result result = train::TorchTrainer(NeverStartedLoop, huge, run).Fit();
  ASSERT_TRUE(result.error);
  EXPECT_STREQ(result.error->kind(), "InfeasibleError") << result.error->what();
  EXPECT_THAT(result.error->what(), HasSubstr("1000"));
  EXPECT_THROW(result.ThrowIfError(), orrery::InfeasibleError);
  EXPECT_EQ(result.num_failures, 0);
  EXPECT_FALSE(fs::exists(result.path)) << "nothing was started for an infeasible run";

  EXPECT_THROW(train::TorchTrainer(NeverStartedLoop, Cpus(0), Run("zero")).Fit(),
               orrery::ConfigError);
  train::ScalingConfig both = Cpus(1);
  both.use_gpu = true;
  both.use_tpu = true;
  EXPECT_THROW(train::TorchTrainer(NeverStartedLoop, both, Run("both")).Fit(), orrery::ConfigError);
  train::ScalingConfig tpu_without = Cpus(1);
  tpu_without.resources_per_worker = {{"TPU", 4}};
  EXPECT_THROW(train::TorchTrainer(NeverStartedLoop, tpu_without, Run("tpu")).Fit(),
               orrery::ConfigError);
  EXPECT_FALSE(fs::exists(dir_.path() + "/results")) << "no run was started";
  EXPECT_EQ(AvailableCpu(), kTestCpus) << "nothing was reserved";
}

TEST_F(TrainTest, CollectivesAcrossWorkerProcessesMatchTheSerialResults) {
  train::TorchTrainer trainer(CollectivesLoop, Cpus(4), Run("collectives"));
  train::Result result = trainer.Fit();
  ASSERT_FALSE(result.error) << ErrorText(result);
  ASSERT_EQ(result.metrics_history.size(), 1u);
  EXPECT_EQ(result.metrics.at("checks"), 10);
  EXPECT_EQ(result.metrics.at("total_checks"), 40) << "every rank ran every check";
}

}  // namespace
