// orrery_scale_bench: one real head at cluster scale (docs/benchmarks.md "Head at scale").
//
// Starts redis-server and an `orrery head` daemon (the cluster test fixture's code:
// tests/cluster/cluster_fixture.h; each its own process on loopback, killed when this
// process exits however it exits), then N simulated nodes in this process that speak the
// real protocol (bench/scale_sim.h), and measures, for each N given:
//   head_cpu_cores_idle     the head's CPU seconds (utime + stime) per wall second while the
//                           nodes only send heartbeats, one per node per second
//   placements_per_s        actors created through CreateActor, counted when a node receives
//                           their StartActor (then each is reported alive by its node)
//   leases_per_s            leases requested, granted to a node and returned
//   pg_create_remove_per_s  one-bundle placement groups created, waited for and removed
//   head_rss_mb             the head's VmRSS after all of the above
//   redis_cmds_per_s        Redis's total_commands_processed over the phases above
//   recovery_s              kill -9 of the head, a new head on the same Redis and port, until
//                           a GetNamedActor lookup answers with the actor
// With --baseline B it also measures placements at B nodes (a cluster of its own) and
// reports placements_vs_<B>_nodes. Targets are reported, not asserted; the exit status is 1
// only when a phase did not complete (nodes not all alive, actors not placed, no recovery).
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/scale_sim.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/cluster/redis_client.h"

namespace {

using orrery::bench::SimCluster;
using orrery::bench::SimOptions;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// utime + stime of process `pid` ("self" for this one), in seconds; -1 when unreadable.
double CpuSeconds(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(stat.substr(paren + 2));
  std::vector<std::string> f;
  for (std::string s; fields >> s && f.size() < 13;) f.push_back(s);
  if (f.size() < 13) return -1;  // fields 3.. of proc(5): utime is 14, stime 15
  return double(std::stoll(f[11]) + std::stoll(f[12])) / double(sysconf(_SC_CLK_TCK));
}

// A "VmRSS"-style line of /proc/<pid>/status, in MiB; -1 when unreadable.
double StatusMb(int pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) return std::atof(line.c_str() + key.size() + 1) / 1024.0;
  }
  return -1;
}

long long RedisCommands(orrery_cluster::Redis& redis) {
  for (const auto& text : redis.Strings({"INFO", "stats"})) {
    size_t at = text.find("total_commands_processed:");
    if (at != std::string::npos) return std::atoll(text.c_str() + at + 25);
  }
  return -1;
}

// The machine's load (other processes compete with the head for its cores).
double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double load = -1;
  in >> load;
  return load;
}

// SIGINT and SIGTERM: the head and Redis of the running round are killed and its directory
// removed before this process exits (they would die with it anyway: the fixture starts them
// with PR_SET_PDEATHSIG, but the directory would stay).
std::atomic<orrery_cluster::Cluster*> g_cluster{nullptr};
struct SignalScope {  // the round whose processes a signal stops
  explicit SignalScope(orrery_cluster::Cluster* cluster) { g_cluster = cluster; }
  ~SignalScope() { g_cluster = nullptr; }
};
void StartSignalWatcher(sigset_t set) {
  std::thread([set] {
    int sig = 0;
    sigwait(&set, &sig);
    if (orrery_cluster::Cluster* c = g_cluster.load()) {
      if (c->head_pid() > 0) kill(c->head_pid(), SIGKILL);
      if (c->redis_pid() > 0) kill(c->redis_pid(), SIGKILL);
      std::error_code ec;
      std::filesystem::remove_all(c->dir(), ec);
    }
    _exit(128 + sig);
  }).detach();
}

struct RoundOptions {
  int nodes = 100;
  int actors = 1000;
  int inboxes = 4;
  int leases = 1000;
  double idle_s = 5;
  double pg_s = 2;
  double recovery_timeout_s = 300;
  int health_threshold = 5;      // heartbeats a node may miss before the head declares it dead
  bool placements_only = false;  // the baseline round
};

struct Round {
  nlohmann::json out;
  std::vector<std::string> problems;  // phases that did not complete
};

// Runs `phase` and records its CPU use by the head, in cores, under out[key]; the head's CPU
// seconds go to *cpu_s when given.
template <typename F>
auto HeadCpu(int pid, Round& r, const char* key, F phase, double* cpu_s = nullptr) {
  double c0 = CpuSeconds(std::to_string(pid)), t0 = Now();
  auto result = phase();
  double used = CpuSeconds(std::to_string(pid)) - c0;
  r.out[key] = used / (Now() - t0);
  if (cpu_s) *cpu_s = used;
  return result;
}

void Idle(const RoundOptions& o, SimCluster& sim, int head_pid, Round& r) {
  double b0 = CpuSeconds("self");
  double t0 = Now();
  HeadCpu(head_pid, r, "head_cpu_cores_idle", [&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(o.idle_s));  // the window
    return 0;
  });
  r.out["bench_cpu_cores_idle"] = (CpuSeconds("self") - b0) / (Now() - t0);
  int alive = sim.AliveNodes(30);
  r.out["nodes_alive_after_idle"] = alive;
  if (alive != o.nodes) r.problems.push_back("nodes died while idle");
}

void Work(const RoundOptions& o, SimCluster& sim, int head_pid, Round& r) {
  const double timeout = 60 + o.actors / 250.0;
  double cpu_s = 0;
  auto p = HeadCpu(
      head_pid, r, "head_cpu_cores_placing",
      [&] { return sim.PlaceActors(o.actors, 256, "keeper", timeout); }, &cpu_s);
  r.out["placements_per_s"] = p.placed / p.seconds;
  // What the head spends per placement: unlike the rate, it holds on a machine whose other
  // processes take the head's cores away part of the time.
  r.out["placements_per_head_cpu_s"] = cpu_s > 0 ? p.placed / cpu_s : 0.0;
  r.out["actors_placed"] = p.placed;
  if (p.placed < o.actors || p.acked < o.actors) r.problems.push_back("actors not all placed");
  if (o.placements_only) return;
  // Each later phase starts once the head has caught up with what is queued for it (at
  // scale, heartbeats that waited behind the placements), and says how long that took.
  r.out["head_lag_after_placing_s"] = sim.PingSeconds(timeout);
  int alive = sim.MakeAlive(256, timeout);
  r.out["actors_alive"] = alive;
  if (alive < o.actors) r.problems.push_back("actors not all alive");
  r.out["head_lag_before_leases_s"] = sim.PingSeconds(timeout);
  auto l = sim.GrantLeases(o.leases, 64, 60 + o.leases / 100.0);
  r.out["leases_per_s"] = l.granted / l.seconds;
  if (l.granted < o.leases) r.problems.push_back("leases not all granted");
  r.out["head_lag_before_pgs_s"] = sim.PingSeconds(timeout);
  auto pg = sim.CreateRemovePgs(o.pg_s, 30);
  r.out["pg_create_remove_per_s"] = pg.done / pg.seconds;
  if (pg.failed) r.problems.push_back("a placement group cycle failed");
}

void Recover(const RoundOptions& o, orrery_cluster::Cluster& cluster, SimCluster& sim, Round& r) {
  cluster.KillHead();
  double t0 = Now();
  try {
    cluster.StartHead(1.0,
                      o.health_threshold);  // waits (20 s at most) for the head's readiness file
  } catch (const std::exception&) {
    // A head slower than that to recover still runs (head_pid()): the lookups below wait.
  }
  // Done when the lookup names the actor. A head that answers without it (the actor died
  // with its node: heartbeats the head could not keep up with) gets 10 s more, then it ends.
  bool back = false;
  double first_answer = -1;
  while (!back && Now() - t0 < o.recovery_timeout_s &&
         (first_answer < 0 || Now() - t0 < first_answer + 10)) {
    auto id = sim.LookupNamed("keeper", 0.5);
    if (id && first_answer < 0) first_answer = Now() - t0;
    back = id && !id->empty() && *id == sim.named_actor_id();
  }
  r.out["recovery_s"] = Now() - t0;
  r.out["recovery_first_answer_s"] = first_answer;
  if (!back) {
    r.problems.push_back(first_answer < 0 ? "the head did not recover"
                                          : "the recovered head does not know the named actor");
    return;
  }
  r.out["head_rss_mb_recovered"] = StatusMb(cluster.head_pid(), "VmRSS");
  int alive = sim.WaitAllAlive(30) ? o.nodes : sim.AliveNodes(10);
  r.out["nodes_alive_after_recovery"] = alive;
  if (alive != o.nodes) r.problems.push_back("nodes not all alive after recovery");
}

Round RunRound(const RoundOptions& o) {
  Round r;
  r.out["nodes"] = o.nodes;
  orrery_cluster::Cluster cluster;  // Redis and the head; killed when it goes out of scope
  SignalScope scope(&cluster);
  cluster.StartHead(1.0, o.health_threshold);  // the daemon's period: 1 s
  SimOptions so;
  so.head_address = "tcp://" + cluster.head_address();
  so.nodes = o.nodes;
  so.inboxes = o.inboxes;
  so.node_cpus = std::max(16.0, std::ceil(2.0 * o.actors / o.nodes) + 16);
  SimCluster sim(so);
  if (orrery::Status s = sim.Start(); !s.ok()) throw std::runtime_error(s.message());
  double t_reg = Now();
  if (!sim.WaitAllAlive(30 + o.nodes / 200.0)) {
    r.problems.push_back("the nodes did not all register");
    return r;
  }
  r.out["registration_s"] = Now() - t_reg;
  orrery_cluster::Redis redis(cluster.redis_address());
  long long cmds0 = RedisCommands(redis);
  double t0 = Now();
  if (!o.placements_only) Idle(o, sim, cluster.head_pid(), r);
  Work(o, sim, cluster.head_pid(), r);
  if (o.placements_only) return r;
  r.out["redis_cmds_per_s"] = double(RedisCommands(redis) - cmds0) / (Now() - t0);
  r.out["head_rss_mb"] = StatusMb(cluster.head_pid(), "VmRSS");
  r.out["head_rss_peak_mb"] = StatusMb(cluster.head_pid(), "VmHWM");
  r.out["heartbeats_refused"] = sim.refused_acks();
  Recover(o, cluster, sim, r);
  sim.Stop();
  r.out["load_avg_1m"] = LoadAverage();
  return r;
}

void PrintText(const nlohmann::json& j) {
  std::printf("--- %d nodes\n", j["nodes"].get<int>());
  for (const auto& [k, v] : j.items()) {
    if (k == "nodes") continue;
    if (v.is_number_float()) {
      std::printf("  %-28s %12.3f\n", k.c_str(), v.get<double>());
    } else {
      std::printf("  %-28s %12s\n", k.c_str(), v.dump().c_str());
    }
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"orrery_scale_bench: one head, Redis and N simulated nodes"};
  std::vector<int> nodes{100};
  RoundOptions o;
  int baseline = 0;
  bool json = false;
  app.add_option("--nodes", nodes, "simulated nodes (one round per value)")
      ->expected(1, 16)
      ->check(CLI::PositiveNumber);
  app.add_option("--actors", o.actors, "actors created (and recorded for the recovery)")
      ->check(CLI::PositiveNumber);
  app.add_option("--leases", o.leases, "leases requested, granted and returned");
  app.add_option("--idle-s", o.idle_s, "seconds of heartbeats only (the CPU window)");
  app.add_option("--pg-s", o.pg_s, "seconds of placement group create/remove cycles");
  app.add_option("--inboxes", o.inboxes, "inboxes the simulated nodes share")
      ->check(CLI::PositiveNumber);
  app.add_option("--recovery-timeout-s", o.recovery_timeout_s, "give up on the recovery after");
  app.add_option("--baseline", baseline, "also measure placements at this many nodes");
  app.add_flag("--json", json, "print JSON (an array, one object per value of --nodes)");
  app.add_flag("--placements-only", o.placements_only,
               "measure only registration and actor placements");
  app.add_option("--health-threshold", o.health_threshold,
                 "heartbeats a node may miss before the head declares it dead");
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;  // blocked in every thread; the watcher takes them
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  StartSignalWatcher(stop_signals);

  nlohmann::json all = nlohmann::json::array();
  int rc = 0;
  try {
    double base_rate = 0, base_per_cpu = 0;
    if (baseline > 0) {
      RoundOptions b = o;
      b.nodes = baseline;
      b.placements_only = true;
      Round r = RunRound(b);
      base_rate = r.out.value("placements_per_s", 0.0);
      base_per_cpu = r.out.value("placements_per_head_cpu_s", 0.0);
      if (!json) PrintText(r.out);
      if (!r.problems.empty()) rc = 1;
    }
    for (int n : nodes) {
      RoundOptions ro = o;
      ro.nodes = n;
      Round r = RunRound(ro);
      if (baseline > 0 && base_rate > 0) {
        r.out["placements_vs_" + std::to_string(baseline) + "_nodes"] =
            r.out.value("placements_per_s", 0.0) / base_rate;
      }
      if (baseline > 0 && base_per_cpu > 0) {
        r.out["placements_per_cpu_vs_" + std::to_string(baseline) + "_nodes"] =
            r.out.value("placements_per_head_cpu_s", 0.0) / base_per_cpu;
      }
      for (const auto& p : r.problems) std::fprintf(stderr, "%d nodes: %s\n", n, p.c_str());
      if (!r.problems.empty()) rc = 1;
      r.out["complete"] = r.problems.empty();
      if (!json) PrintText(r.out);
      all.push_back(r.out);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "orrery_scale_bench: %s\n", e.what());
    rc = 1;
  }
  if (json) std::cout << all.dump(2) << "\n";
  return rc;
}
