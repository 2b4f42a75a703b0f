// orrery_cluster_bench: cluster-level benchmarks (issue: multi-node cluster).
//
// Starts a real cluster with the `orrery` command (Redis, a head, and a second node, in a
// private ORRERY_TMPDIR), then measures, each next to the raw ZeroMQ round-trip rate of the
// same run:
//   placement_group_create/removal  create a one-bundle group, wait for it, remove it
//   actor_creation_across_nodes     batches of 10 actors spread over both nodes, one call each
//   n_n_actor_calls_async           N driver processes, each with one actor per node, batches
//                                   of async calls; the sum of their rates
//   head_recovery_s                 kill -9 the head (with actors, groups and jobs in Redis),
//                                   start it again, time until a named-actor lookup answers
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "orrery/orrery.h"
#include "timeit.h"
#include "zmq_limit.h"

namespace {

using Clock = std::chrono::steady_clock;

class Pong {
 public:
  static Pong* Create() { return new Pong(); }
  int Ping(int x) { return x; }
};
ORRERY_REMOTE(Pong::Create, &Pong::Ping);

std::string g_cli;  // path of the `orrery` command

int Sh(const std::string& cmd) { return std::system(cmd.c_str()); }

nlohmann::json Session(const std::string& tmp) {
  std::ifstream in(tmp + "/session_latest/session.json");
  return nlohmann::json::parse(in);
}

// One driver process of n_n_actor_calls_async: prints its calls/s.
int ClientMain(const std::string& address, double seconds) {
  orrery::Config c;
  c.address = address;
  orrery::Init(c);
  std::vector<orrery::ActorHandle<Pong>> actors;
  for (int i = 0; i < 2; ++i) {
    actors.push_back(orrery::Actor(Pong::Create)
                         .SetSchedulingStrategy(orrery::SpreadSchedulingStrategy{})
                         .Remote());
  }
  for (auto& a : actors) orrery::Get(a.Task(&Pong::Ping).Remote(0));
  long long calls = 0;
  auto start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    std::vector<orrery::ObjectRef<int>> refs;
    for (int i = 0; i < 1000; ++i) refs.push_back(actors[i % 2].Task(&Pong::Ping).Remote(i));
    orrery::Get(refs);
    calls += 1000;
  }
  double rate = calls / std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("%.1f\n", rate);
  std::fflush(stdout);
  orrery::Shutdown();
  return 0;
}

void Report(nlohmann::json& out, const std::string& name, double value, double limit,
            const char* unit) {
  std::printf("%-34s %12.1f %-6s ratio %.3f\n", name.c_str(), value, unit,
              limit > 0 ? value / limit : 0.0);
  out[name] = {{"value", value}, {"unit", unit}, {"ratio", limit > 0 ? value / limit : 0.0}};
}

// The cluster under test: Redis, a head and two nodes started by `orrery start` in a private
// ORRERY_TMPDIR.
struct Cluster {
  std::string tmp;
  std::string address;
  std::string redis;
  std::string redis_password_file;
  int head_pid = 0;
};

bool StartCluster(Cluster* c) {
  char tmpl[] = "/tmp/orrery_cluster_bench_XXXXXX";
  c->tmp = mkdtemp(tmpl);
  setenv("ORRERY_TMPDIR", c->tmp.c_str(), 1);
  if (Sh(g_cli + " start --head --port 0 --num-cpus 2 --no-dashboard > " + c->tmp +
         "/start.log 2>&1") != 0) {
    std::cerr << "cannot start a cluster; see " << c->tmp << "/start.log\n";
    return false;
  }
  nlohmann::json head_session = Session(c->tmp);
  c->address = head_session["values"]["head_address"];
  c->redis = head_session["values"]["redis_address"];
  c->redis_password_file = head_session["values"].value("redis_password_file", "");
  c->head_pid = head_session["pids"][1];
  Sh(g_cli + " start --address " + c->address + " --num-cpus 2 >> " + c->tmp + "/start.log 2>&1");
  return true;
}

void StopCluster(const Cluster& c) {
  Sh(g_cli + " stop > /dev/null 2>&1");
  // The restarted head is not in a session: stop it by the pid its readiness file names
  // (docs/cli.md "Readiness files").
  std::ifstream ready(c.tmp + "/head2.ready");
  auto restarted = nlohmann::json::parse(ready, nullptr, /*allow_exceptions=*/false);
  if (restarted.is_object() && restarted.contains("pid") && restarted["pid"].is_number_integer() &&
      restarted["pid"].get<int>() > 0) {
    kill(restarted["pid"].get<int>(), SIGTERM);
  }
  Sh("rm -rf " + c.tmp);
}

// placement_group_create/removal and actor_creation_across_nodes.
void BenchControlPlane(nlohmann::json& out, double limit, const orrery::bench::TimingOptions& opt) {
  auto pg_rate = orrery::bench::TimeIt(
      [] {
        auto pg = orrery::CreatePlacementGroup({.name = "", .bundles = {{{"CPU", 0.01}}}});
        pg.Wait(10);
        orrery::RemovePlacementGroup(pg.Id());
      },
      1.0, opt);
  Report(out, "placement_group_create/removal", pg_rate.mean, limit, "ops/s");

  auto create_rate = orrery::bench::TimeIt(
      [] {
        std::vector<orrery::ActorHandle<Pong>> actors;
        for (int i = 0; i < 10; ++i) {
          actors.push_back(orrery::Actor(Pong::Create)
                               .SetSchedulingStrategy(orrery::SpreadSchedulingStrategy{})
                               .Remote());
        }
        std::vector<orrery::ObjectRef<int>> refs;
        for (auto& a : actors) refs.push_back(a.Task(&Pong::Ping).Remote(1));
        orrery::Get(refs);
        for (auto& a : actors) a.Kill();
      },
      10.0, opt);
  Report(out, "actor_creation_across_nodes", create_rate.mean, limit, "ops/s");
}

// n_n_actor_calls_async: separate driver processes, the sum of their rates.
void BenchDriverCalls(nlohmann::json& out, double limit, const std::string& address, int drivers,
                      double duration) {
  std::vector<FILE*> pipes;
  for (int i = 0; i < drivers; ++i) {
    std::string cmd = "/proc/" + std::to_string(getpid()) + "/exe --client " + address + " " +
                      std::to_string(duration);
    pipes.push_back(popen(cmd.c_str(), "r"));
  }
  double total = 0;
  for (FILE* p : pipes) {
    double r = 0;
    if (p && std::fscanf(p, "%lf", &r) == 1) total += r;
    if (p) pclose(p);
  }
  Report(out, "n_n_actor_calls_async", total, limit, "ops/s");
}

// True once `pid` has exited (gone, or a zombie: its sockets are closed), within 10 s. A
// process killed with SIGKILL holds its listening port until the kernel has torn it down,
// which on a loaded machine can take longer than starting the next head.
bool WaitUntilExited(int pid) {
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return true;
    auto paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z')
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// What the restarted head printed, when it did not come back.
void PrintRestartedHeadLog(const Cluster& c) {
  std::ifstream log(c.tmp + "/head2.log");
  std::vector<std::string> lines;
  for (std::string line; std::getline(log, line);) lines.push_back(line);
  size_t from = lines.size() > 20 ? lines.size() - 20 : 0;
  std::cerr << "the restarted head's log (" << c.tmp << "/head2.log), its last lines:\n";
  for (size_t i = from; i < lines.size(); ++i) std::cerr << "  " << lines[i] << "\n";
}

// head_recovery_s: the state the head reloads is what the runs before and this named actor
// left. False when the named actor was not found again within 30 s.
bool BenchHeadRecovery(nlohmann::json& out, const Cluster& c) {
  auto keeper = orrery::Actor(Pong::Create)
                    .SetName("keeper")
                    .SetLifetime(orrery::ActorLifetime::kDetached)
                    .Remote();
  orrery::Get(keeper.Task(&Pong::Ping).Remote(1));
  kill(c.head_pid, SIGKILL);
  auto start = Clock::now();
  if (!WaitUntilExited(c.head_pid)) std::cerr << "the head did not exit within 10 s of SIGKILL\n";
  std::string port = c.address.substr(c.address.rfind(':') + 1);
  std::string cmd = g_cli + " head --port " + port + " --redis-address " + c.redis +
                    " --redis-password-file " + c.redis_password_file +
                    // The cluster's token: every session of this cluster keeps a copy.
                    " --token-file " + c.tmp + "/session_latest/token --ready-file " + c.tmp +
                    "/head2.ready >> " + c.tmp + "/head2.log 2>&1 &";
  Sh(cmd);
  bool back = false;
  while (!back && std::chrono::duration<double>(Clock::now() - start).count() < 30) {
    try {
      back = orrery::GetActor<Pong>("keeper").has_value();
    } catch (const orrery::Error&) {
    }
  }
  double recovery = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("%-34s %12.3f s      (kill -9, restart, named lookup answered; %s)\n",
              "head_recovery_s", recovery, back ? "recovered" : "NOT recovered");
  out["head_recovery_s"] = {{"value", recovery}, {"unit", "s"}, {"recovered", back}};
  if (!back) PrintRestartedHeadLog(c);
  keeper.Kill();
  return back;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == orrery::bench::kEchoServerFlag) {
    return orrery::bench::RunZmqEchoServer(argv[2]);
  }
  orrery::RunWorkerIfRequested(argc, argv);
  if (argc == 4 && std::string(argv[1]) == "--client")
    return ClientMain(argv[2], std::atof(argv[3]));

  CLI::App app{"orrery_cluster_bench: cluster benchmarks against the raw ZeroMQ round trip"};
  double duration = 3;
  int drivers = 2;
  bool json = false;
  g_cli = ORRERY_CLI_PATH;
  app.add_option("--duration-s", duration, "measured seconds per metric");
  app.add_option("--drivers", drivers, "driver processes for n_n_actor_calls_async");
  app.add_option("--orrery-cli", g_cli, "the orrery command");
  app.add_flag("--json", json, "also print JSON");
  CLI11_PARSE(app, argc, argv);

  orrery::bench::TimingOptions opt;
  opt.duration_s = duration;
  opt.warmup_s = 0.5;
  nlohmann::json out;
  double limit = orrery::bench::MeasureZmqRoundTrip(opt).mean;
  std::printf("%-34s %12.1f ops/s  (the limit)\n", "zmq_roundtrip_limit", limit);

  Cluster cluster;
  if (!StartCluster(&cluster)) return 1;
  orrery::Config c;
  c.address = cluster.address;
  orrery::Init(c);
  int rc = 0;
  try {
    BenchControlPlane(out, limit, opt);
    BenchDriverCalls(out, limit, cluster.address, drivers, duration);
    if (!BenchHeadRecovery(out, cluster)) rc = 1;
  } catch (const std::exception& e) {
    std::cerr << "cluster bench failed: " << e.what() << "\n";
    rc = 1;
  }
  orrery::Shutdown();
  StopCluster(cluster);
  if (json) std::cout << out.dump(2) << "\n";
  return rc;
}
