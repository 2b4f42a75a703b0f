// Chaos test: a real cluster (redis-server, an `orrery head`, three `orrery node` daemons on
// loopback; this binary is the driver and the workers' executable) under a steady load of
// actor calls, tasks and one training run, while a seeded chaos thread kills workers, nodes,
// Redis and the head with SIGKILL and restarts the daemons. Afterwards:
//   - every call returned its value or raised an orrery::Error other than GetTimeoutError
//     (no call hung past its timeout), and every call submitted was accounted for;
//   - the training run finished, or failed with TrainingFailedError;
//   - the head and Redis agree on the nodes and the named actors, and no actor is left
//     pending, restarting or ALIVE without a worker;
//   - no process, /dev/shm segment or descriptor is left over.
//
// ORRERY_CHAOS_SECONDS (default 180) sets how long the chaos lasts (30 for a quick local run);
// ORRERY_CHAOS_SEED replays a run (the seed is printed at the start). On failure the
// cluster's directory (every daemon's log) is kept and its path printed.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "orrery/train/train.h"
#include "tests/chaos/chaos_monkey.h"
#include "tests/chaos/consistency.h"
#include "tests/chaos/ledger.h"
#include "tests/chaos/processes.h"
#include "tests/chaos/workload.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/cluster/redis_client.h"
#include "tests/skip_exit_code.h"

namespace fs = std::filesystem;
namespace train = orrery::train;
using orrery_chaos::Ledger;
using orrery_chaos::Role;
using orrery_cluster::WaitFor;

namespace {

using orrery_chaos::ActorLoad;
using orrery_chaos::ChaosTrainLoop;
using orrery_chaos::Echo;
using orrery_chaos::kGetTimeoutMs;
using orrery_chaos::Load;
using orrery_chaos::Nap;
using orrery_chaos::TaskLoad;
using orrery_chaos::Twice;

constexpr double kHealthPeriodS = 0.25;
constexpr int kHealthThreshold = 8;
constexpr int kNodes = 3;
constexpr int kActorThreads = 3;
// Descriptors a process may hold above what it held before any load: a few per worker
// process it can be talking to now, plus a margin. A leak grows instead with every peer
// that came and went (dozens of workers in a run).
constexpr int kFdsPerWorker = 4;
constexpr int kFdSlack = 16;

double EnvDouble(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atof(v) : fallback;
}

// ------------------------------------------------------------------ the test

class ChaosTest : public ::testing::Test {
 protected:
  void SetUp() override {
    duration_s_ = EnvDouble("ORRERY_CHAOS_SECONDS", 180);
    const char* seed = std::getenv("ORRERY_CHAOS_SEED");
    seed_ = seed && *seed ? std::strtoull(seed, nullptr, 10) : std::random_device{}();
    std::printf(
        "chaos: seed %llu, %.0f s (replay with ORRERY_CHAOS_SEED=%llu ORRERY_CHAOS_SECONDS=%.0f)\n",
        (unsigned long long)seed_, duration_s_, (unsigned long long)seed_, duration_s_);
    std::fflush(stdout);
    shm_before_ = orrery_chaos::ShmEntries();
    cluster_ = std::make_unique<orrery_cluster::Cluster>();
    marker_ = "ORRERY_TMPDIR=" + cluster_->dir();
    dir_ = cluster_->dir();
    cluster_->StartHead(kHealthPeriodS, kHealthThreshold);
    for (int i = 0; i < kNodes; ++i) cluster_->AddNode("", "host=n" + std::to_string(i), 4);
    orrery::Config c;
    c.address = cluster_->head_address();
    c.infeasible_timeout_s = 60;
    orrery::Init(c);
    ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == size_t(kNodes); }))
        << "the nodes did not join";
    fresh_fds_ = DaemonFds();
    sampler_ = std::thread([this] { Sample(); });
  }

  void TearDown() override {
    if (orrery::IsInitialized()) orrery::Shutdown();
    if (monkey_) monkey_->Stop();
    StopSampler();
    if (cluster_ && (HasFailure() || std::getenv("ORRERY_CHAOS_KEEP"))) {
      cluster_->KeepDirectory();
      std::printf("chaos: the daemons' logs are kept in %s (seed %llu)\n", cluster_->dir().c_str(),
                  (unsigned long long)seed_);
    }
    cluster_.reset();
  }

  // Every 0.5 s: remembers every pid of the cluster (to attribute shared-memory segments).
  void Sample() {
    while (!sampler_stop_) {
      auto procs = orrery_chaos::MarkedProcesses(marker_, dir_);
      {
        std::lock_guard<std::mutex> lock(seen_mu_);
        for (const auto& p : procs) seen_pids_.insert(p.pid);
      }
      for (int i = 0; i < 25 && !sampler_stop_; ++i) Nap(20);
    }
  }
  void StopSampler() {
    sampler_stop_ = true;
    if (sampler_.joinable()) sampler_.join();
  }

  // Waits for the load threads; a thread still inside a call long after that call's
  // timeout is a hang: report it and end the process (it cannot be joined).
  void JoinOrDie(std::vector<std::thread>& threads, std::atomic<int>& running, int limit_s) {
    bool done = WaitFor([&] { return running == 0; }, limit_s * 1000);
    if (!done) {
      ADD_FAILURE() << running << " load threads did not return within " << limit_s
                    << " s of being told to stop; calls still open:\n"
                    << Join(load_.ledger.Open());
      std::printf("%s", load_.ledger.Summary().c_str());
      cluster_->KeepDirectory();
      std::printf("chaos: hung; logs in %s (seed %llu)\n", cluster_->dir().c_str(),
                  (unsigned long long)seed_);
      std::fflush(stdout);
      cluster_.reset();
      std::_Exit(1);
    }
    for (auto& t : threads) t.join();
  }

  static std::string Join(const std::vector<std::string>& lines) {
    std::string out;
    for (const auto& l : lines) out += "  " + l + "\n";
    return out.empty() ? "  (none)\n" : out;
  }

  orrery_chaos::Records RedisTable(const std::string& table) {
    orrery_cluster::Redis redis(cluster_->redis_address());
    if (!redis.ok()) return {};
    return redis.HGetAll("orrery:default:" + table);
  }

  // `orrery list nodes --json` against the cluster, parsed; nullopt (and what it printed in
  // `out`) when it fails or does not finish within 60 s.
  std::optional<std::vector<orrery::NodeInfo>> CliNodes(std::string* out) {
    const std::string file = cluster_->dir() + "/cli_list_nodes.out";
    std::error_code ec;
    fs::remove(file, ec);
    int pid = orrery_cluster::Spawn(
        {orrery_cluster::CliPath(), "list", "nodes", "--json", "--address",
         cluster_->head_address(), "--redis-address", cluster_->redis_address()},
        file);
    int status = 0;
    bool exited = WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 60000);
    if (!exited) orrery_cluster::KillHard(pid);
    std::ifstream in(file);
    *out = std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!exited || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
    auto j =
        nlohmann::json::parse(out->substr(std::min(out->size(), out->find('['))), nullptr, false);
    if (!j.is_array()) return std::nullopt;
    std::vector<orrery::NodeInfo> nodes;
    for (const auto& n : j) {
      if (!n.is_object()) return std::nullopt;
      orrery::NodeInfo info;
      info.node_id = orrery::NodeId::FromHex(n.value("node_id", ""));
      info.alive = n.value("alive", false);
      const nlohmann::json total = n.value("total", nlohmann::json::object());
      for (const auto& [k, v] : total.items())
        if (v.is_number()) info.total[k] = v.get<double>();
      nodes.push_back(info);
    }
    return nodes;
  }

  std::set<int> WorkerPids() {
    std::set<int> out;
    for (const auto& p : orrery_chaos::MarkedProcesses(marker_, dir_))
      if (p.role == Role::kWorker) out.insert(p.pid);
    return out;
  }

  // pid -> descriptors, for the head, the nodes and this driver.
  std::map<std::string, std::pair<int, int>> DaemonFds() {
    std::map<std::string, std::pair<int, int>> out;
    auto d = monkey_ ? monkey_->Current()
                     : orrery_chaos::ChaosMonkey::Daemons{
                           cluster_->redis_pid(), cluster_->head_pid(), cluster_->node_pids()};
    out["head"] = {d.head, orrery_chaos::CountFds(d.head)};
    for (size_t i = 0; i < d.nodes.size(); ++i)
      out["node" + std::to_string(i)] = {d.nodes[i], orrery_chaos::CountFds(d.nodes[i])};
    out["driver"] = {int(getpid()), orrery_chaos::CountFds(getpid())};
    return out;
  }

  std::map<std::string, std::pair<int, int>> fresh_fds_;  // before any load
  double duration_s_ = 180;
  uint64_t seed_ = 0;
  std::string marker_;
  std::string dir_;  // the cluster's directory (redis-server's working directory)
  std::set<std::string> shm_before_;
  std::unique_ptr<orrery_cluster::Cluster> cluster_;
  std::unique_ptr<orrery_chaos::ChaosMonkey> monkey_;
  Load load_;
  std::thread sampler_;
  std::atomic<bool> sampler_stop_{false};
  std::mutex seen_mu_;
  std::set<int> seen_pids_;
};

TEST_F(ChaosTest, ClusterUnderLoadSurvivesKillsAndLeavesNothingBehind) {
  // ---- load
  std::vector<std::thread> threads;
  std::atomic<int> running{0};
  auto spawn = [&](auto fn) {
    ++running;
    threads.emplace_back([&running, fn] {
      fn();
      --running;
    });
  };
  for (int i = 0; i < kActorThreads; ++i) spawn([this, i] { ActorLoad(i, &load_); });
  spawn([this] { TaskLoad(&load_); });

  const std::string stop_file = cluster_->dir() + "/stop_training";
  train::Result result;
  std::string fit_threw;
  spawn([&] {
    train::ScalingConfig scaling;
    scaling.num_workers = 2;
    train::RunConfig run;
    run.name = "chaos_run";
    run.storage_path = cluster_->dir() + "/results";
    run.verbose = 0;
    run.failure_config.max_failures = 1000;
    run.reservation_timeout_s = 300;
    train::TorchConfig torch;
    torch.timeout_s = 60;
    try {
      result = train::TorchTrainer(ChaosTrainLoop, scaling, run, torch, {{"stop_file", stop_file}})
                   .Fit();
    } catch (const std::exception& e) {
      fit_threw = e.what();
    }
  });

  // Warm-up: every kind of load has succeeded once and training has reported, before the
  // first kill and the descriptor baseline.
  const std::string run_path = cluster_->dir() + "/results/chaos_run";
  bool warm = WaitFor(
      [&] {
        auto t = load_.ledger.Totals();
        bool checkpointed = false;
        std::error_code ec;
        for (fs::directory_iterator it(run_path, ec), end; !ec && it != end; it.increment(ec))
          checkpointed =
              checkpointed || it->path().filename().string().rfind("checkpoint_", 0) == 0;
        return t["actor call"].ok >= kActorThreads && t["task"].ok >= 4 && checkpointed;
      },
      120000);
  EXPECT_TRUE(warm) << "the load did not get going before any chaos:\n" << load_.ledger.Summary();
  auto fds_before = DaemonFds();

  // ---- chaos
  auto plan = orrery_chaos::MakePlan(seed_, duration_s_);
  std::printf("chaos: %zu events planned\n", plan.size());
  for (const auto& e : plan) std::printf("  %s\n", orrery_chaos::Describe(e).c_str());
  std::fflush(stdout);
  monkey_ = std::make_unique<orrery_chaos::ChaosMonkey>(cluster_.get(), plan, marker_,
                                                        kHealthPeriodS, kHealthThreshold);
  auto chaos_start = std::chrono::steady_clock::now();
  std::printf("chaos: starts at t=%.1fs of the load's clock\n", load_.ledger.Seconds());
  monkey_->Start();
  for (int tick = 1;
       std::chrono::steady_clock::now() - chaos_start < std::chrono::duration<double>(duration_s_);
       ++tick) {
    Nap(500);
    if (!monkey_->Failures().empty()) break;
    if (tick % 20 == 0) {  // progress every 10 s: where calls stop completing shows here
      std::string line;
      for (const auto& [op, c] : load_.ledger.Totals())
        line += "  " + op + " " + std::to_string(c.ok) + "/" + std::to_string(c.submitted);
      std::printf("chaos: t=%.1fs ok/submitted:%s\n", load_.ledger.Seconds(), line.c_str());
      std::fflush(stdout);
    }
  }
  monkey_->Stop();
  EXPECT_TRUE(monkey_->Failures().empty()) << "a killed daemon could not be restarted:\n"
                                           << Join(monkey_->Failures());
  std::printf("chaos: %d events done\n", monkey_->events_done());

  // ---- the cluster recovers: three live nodes, then the load stops and training ends
  EXPECT_TRUE(WaitFor(
      [] {
        try {
          int alive = 0;
          for (const auto& n : orrery::Nodes()) alive += n.alive;
          return alive == kNodes;
        } catch (const orrery::Error&) {
          return false;
        }
      },
      60000))
      << "the head does not see " << kNodes << " live nodes after the chaos";
  load_.stop = true;
  std::ofstream(stop_file).close();
  // A call may take its full timeout; Fit() may be restarting its group.
  JoinOrDie(threads, running, kGetTimeoutMs / 1000 + 180);
  std::printf("chaos: the load's books\n%s", load_.ledger.Summary().c_str());
  std::printf("chaos: the first errors of each kind\n%s", load_.ledger.Examples().c_str());

  // ---- every call is accounted for: returned, or raised a typed error in time
  EXPECT_TRUE(load_.ledger.Open().empty()) << "calls never closed:\n" << Join(load_.ledger.Open());
  EXPECT_TRUE(load_.ledger.Violations().empty()) << Join(load_.ledger.Violations());
  for (const auto& [op, c] : load_.ledger.Totals()) {
    EXPECT_EQ(c.submitted, c.closed()) << op;
    EXPECT_EQ(c.timed_out, 0) << op << ": calls hung until their " << kGetTimeoutMs
                              << " ms timeout";
    EXPECT_GT(c.ok, 0) << op;
  }

  // ---- training finished, or failed as TrainingFailedError
  EXPECT_TRUE(fit_threw.empty()) << "Fit() threw: " << fit_threw;
  if (result.error) {
    EXPECT_STREQ(result.error->kind(), "TrainingFailedError") << result.error->what();
    std::printf("chaos: training failed (%s) after %d restarts: %s\n", result.error->kind(),
                result.num_failures, result.error->what());
  } else {
    std::printf("chaos: training finished at step %.0f after %d restarts\n",
                result.metrics.count("step") ? result.metrics.at("step") : -1.0,
                result.num_failures);
    EXPECT_GT(result.metrics.count("step") ? result.metrics.at("step") : 0.0, 0);
  }
  int wrong_steps = 0;
  for (const auto& m : result.metrics_history)
    wrong_steps += m.count("allreduce_ok") && m.at("allreduce_ok") == 1.0 ? 0 : 1;
  EXPECT_EQ(wrong_steps, 0) << "reports whose all-reduce was wrong (of "
                            << result.metrics_history.size() << ")";

  // ---- the run's record and metrics in Redis match what Fit() returned: one stream entry
  // per report, none twice (a report resent across a head restart must not be appended again)
  if (!result.run_id.empty()) {
    orrery_cluster::Redis redis(cluster_->redis_address());
    const std::string want_status = result.error ? "ERRORED" : "FINISHED";
    nlohmann::json record;
    EXPECT_TRUE(WaitFor([&] {
      record = nlohmann::json::parse(redis.HGet("orrery:default:train_runs", result.run_id),
                                     nullptr, false);
      return record.is_object() && record.value("status", "") == want_status;
    })) << "the run's record in Redis is not "
        << want_status << ": " << record.dump().substr(0, 500);
    if (record.is_object()) {
      EXPECT_EQ(record.value("iterations", -1), int(result.metrics_history.size()));
      EXPECT_EQ(record.value("num_failures", -1), result.num_failures);
    }
    auto entries = redis.XRange("orrery:default:train:" + result.run_id + ":metrics");
    std::map<std::string, int> seen;
    for (const auto& e : entries) seen[e.count("iteration") ? e.at("iteration") : "?"]++;
    std::string twice;
    for (const auto& [it, n] : seen)
      if (n > 1) twice += " " + it + " (x" + std::to_string(n) + ")";
    std::string missing;
    for (size_t i = 1; i <= result.metrics_history.size(); ++i)
      if (!seen.count(std::to_string(i))) missing += " " + std::to_string(i);
    EXPECT_EQ(entries.size(), result.metrics_history.size())
        << "metrics stream entries vs reports; iterations missing from the stream:" << missing;
    EXPECT_TRUE(twice.empty()) << "iterations in the metrics stream more than once:" << twice;
  }

  // ---- still serving: a new actor and a new task work
  {
    auto fresh = orrery::Actor(Echo::Create).SetName("chaos-after").Remote(int64_t(7));
    load_.Named("chaos-after");
    EXPECT_NO_THROW(
        EXPECT_EQ(*orrery::Get(fresh.Task(&Echo::Call).Remote(int64_t(1)), kGetTimeoutMs), 10));
    EXPECT_NO_THROW(
        EXPECT_EQ(*orrery::Get(orrery::Task(Twice).Remote(int64_t(5)), kGetTimeoutMs), 11));
  }

  // ---- the head and Redis agree, and every actor is at rest
  std::vector<std::string> diffs;
  bool agree = WaitFor(
      [&] {
        diffs.clear();
        try {
          for (auto& d : orrery_chaos::CompareNodes(orrery::Nodes(), RedisTable("nodes")))
            diffs.push_back(d);
          std::set<std::string> names;
          {
            std::lock_guard<std::mutex> lock(load_.mu);
            names = load_.actor_names;
          }
          auto lookup = [](const std::string& name) {
            auto h = orrery::GetActor<Echo>(name);
            return h ? h->ID().Hex() : std::string();
          };
          auto actors = RedisTable("actors");
          for (auto& d : orrery_chaos::CompareNamedActors(names, lookup, actors))
            diffs.push_back(d);
          for (auto& d : orrery_chaos::UnsettledActors(actors, WorkerPids())) diffs.push_back(d);
        } catch (const orrery::Error& e) {
          diffs.push_back(std::string("asking the head: ") + e.kind() + ": " + e.what());
        }
        return diffs.empty();
      },
      30000);
  EXPECT_TRUE(agree) << "the head and Redis disagree:\n" << Join(diffs);
  // And as a user sees it: `orrery list nodes --json` (the head's answer) against Redis.
  std::string cli_out;
  auto cli_nodes = CliNodes(&cli_out);
  EXPECT_TRUE(cli_nodes.has_value()) << "`orrery list nodes --json` failed:\n" << cli_out;
  if (cli_nodes) {
    auto cli_diffs = orrery_chaos::CompareNodes(*cli_nodes, RedisTable("nodes"));
    EXPECT_TRUE(cli_diffs.empty()) << "`orrery list nodes --json` and Redis disagree:\n"
                                   << Join(cli_diffs);
  }

  // ---- descriptors stay bounded: what a process held before any load, plus a few for
  // each worker process it may be talking to now
  auto fds_after = DaemonFds();
  auto procs = orrery_chaos::MarkedProcesses(marker_, dir_);
  int workers = 0, fresh_node_max = 0;
  for (const auto& p : procs) workers += p.role == Role::kWorker;
  for (const auto& [name, pf] : fresh_fds_)
    if (name.rfind("node", 0) == 0) fresh_node_max = std::max(fresh_node_max, pf.second);
  for (const auto& [name, pf] : fds_after) {
    int children = workers;  // the head and the driver may talk to every worker
    int fresh = fresh_fds_[name].second;
    if (name.rfind("node", 0) == 0) {
      children = 0;
      for (const auto& p : procs)
        children += p.pid != pf.first && orrery_chaos::DescendsFrom(p.pid, pf.first);
      fresh = fresh_node_max;  // a restarted node is held to what a fresh one held
    }
    // A process that was there before the chaos also may hold what it held then.
    int before = fds_before[name].first == pf.first ? fds_before[name].second : 0;
    int bound = std::max(fresh + kFdsPerWorker * children, before) + kFdSlack;
    std::printf(
        "chaos: %s (pid %d) holds %d descriptors (%d before any load; %d before the chaos; %d "
        "workers; bound %d)\n",
        name.c_str(), pf.first, pf.second, fresh_fds_[name].second, fds_before[name].second,
        children, bound);
    EXPECT_LE(pf.second, bound) << name << " (pid " << pf.first << ") holds " << pf.second
                                << " descriptors, " << fresh << " before any load, with "
                                << children << " worker processes now";
  }

  // ---- the driver goes: its actors die and their workers exit
  auto actors_before_shutdown = RedisTable("actors");
  std::set<int> actor_pids = orrery_chaos::AliveActorPids(actors_before_shutdown);
  orrery::Shutdown();
  std::vector<std::string> alive;
  EXPECT_TRUE(WaitFor(
      [&] {
        alive = orrery_chaos::NotDead(RedisTable("actors"));
        return alive.empty();
      },
      30000))
      << "actors not DEAD in Redis after their driver shut down:\n"
      << Join(alive);
  std::vector<std::string> jobs_running;
  EXPECT_TRUE(WaitFor(
      [&] {
        jobs_running.clear();
        for (const auto& [id, text] : RedisTable("jobs")) {
          auto j = nlohmann::json::parse(text, nullptr, false);
          if (j.is_object() && j.value("pid", 0) == int(getpid()) &&
              j.value("state", "") != "FINISHED")
            jobs_running.push_back(id + " " + j.value("state", "?"));
        }
        return jobs_running.empty();
      },
      30000))
      << "this driver's job is not FINISHED in Redis after Shutdown():\n"
      << Join(jobs_running);
  std::vector<int> lingering;
  EXPECT_TRUE(WaitFor(
      [&] {
        lingering.clear();
        for (int pid : actor_pids)
          if (orrery_chaos::CountFds(pid) >= 0 && kill(pid, 0) == 0) lingering.push_back(pid);
        return lingering.empty();
      },
      30000))
      << lingering.size() << " actor worker processes outlived their driver's shutdown, e.g. pid "
      << lingering[0];

  // ---- no orphans: every process of the cluster is a current daemon or a descendant of a
  // current node (what a killed node started died with it)
  auto current = monkey_->Current();
  std::vector<orrery_chaos::Proc> orphans;
  EXPECT_TRUE(WaitFor(
      [&] {
        orphans.clear();
        for (const auto& p : orrery_chaos::MarkedProcesses(marker_, dir_)) {
          if (p.pid == current.redis || p.pid == current.head) continue;
          bool under_node = false;
          for (int node : current.nodes)
            under_node = under_node || orrery_chaos::DescendsFrom(p.pid, node);
          if (!under_node) orphans.push_back(p);
        }
        return orphans.empty();
      },
      15000))
      << "processes of the cluster that no current daemon accounts for:\n"
      << orrery_chaos::Describe(orphans);

  // ---- the cluster stops: nothing is left running, and no shared memory
  monkey_.reset();
  StopSampler();
  cluster_->KeepDirectory();  // the kill below; the directory goes in TearDown unless failing
  std::string dir = cluster_->dir();
  {
    // Stop the daemons (SIGKILL, as the fixture does) but keep the directory for now.
    auto keep = std::move(cluster_);
    keep.reset();
  }
  std::vector<orrery_chaos::Proc> left;
  EXPECT_TRUE(WaitFor(
      [&] {
        left = orrery_chaos::MarkedProcesses(marker_, dir_);
        return left.empty();
      },
      15000))
      << "processes left after the cluster was stopped:\n"
      << orrery_chaos::Describe(left);
  std::vector<std::string> shm_left;
  {
    std::lock_guard<std::mutex> lock(seen_mu_);
    for (const auto& name : orrery_chaos::ShmEntries()) {
      if (shm_before_.count(name) || name.rfind("orrery-", 0) != 0) continue;
      // "orrery-coll-<pid>-<random>": created by process <pid>.
      size_t dash = name.find('-', std::string("orrery-coll-").size());
      int pid = std::atoi(name.c_str() + std::min(name.size(), std::string("orrery-coll-").size()));
      if (dash != std::string::npos && seen_pids_.count(pid)) shm_left.push_back(name);
    }
  }
  EXPECT_TRUE(shm_left.empty())
      << "shared-memory segments the cluster's processes left in /dev/shm:\n"
      << Join(shm_left);
  if (HasFailure() || std::getenv("ORRERY_CHAOS_KEEP")) {
    std::printf("chaos: the daemons' logs are kept in %s (seed %llu)\n", dir.c_str(),
                (unsigned long long)seed_);
  } else {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
