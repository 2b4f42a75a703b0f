#include "cli/src/start_cmd.h"

#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>

#include "cli/src/dashboard_cmd.h"
#include "cli/src/duration.h"
#include "cli/src/ready_file.h"
#include "cli/src/redis_server.h"
#include "cli/src/session.h"
#include "cli/src/session_secrets.h"
#include "core/internal/process_exists.h"
#include "core/internal/redis_store.h"
#include "dashboard/internal/auth.h"

namespace orrery::cli {

namespace {

int Fail(const std::string& message, Session* session = nullptr) {
  std::cerr << "orrery start: " << message << "\n";
  if (session) {
    StopProcesses(session->pids);
    DiscardFailedSession(*session);
  }
  return 1;
}

// How the session's daemons authenticate: its token file, or --insecure.
std::vector<std::string> CredentialArgs(const Session& s) {
  auto it = s.values.find("insecure");
  if (it != s.values.end() && it->second == "1") return {"--insecure"};
  return {"--token-file", s.dir + "/token"};
}

// Flags that contradict each other or expose the cluster without saying so: says why and
// returns 2; else 0.
int CheckFlags(const StartFlags& f) {
  if (f.head_mode == !f.join_address.empty()) {
    std::cerr << "orrery start: give exactly one of --head and --address HOST:PORT\n";
    return 2;
  }
  bool insecure = f.credentials.insecure;
  if (insecure && !dashboard::IsLoopbackHost(f.bind) && !f.insecure_allow_remote) {
    std::cerr << "orrery start: --insecure with --bind " << f.bind
              << " would let anyone who reaches this host run code on it; add "
                 "--insecure-allow-remote if that is "
                 "really meant (docs/security.md)\n";
    return 2;
  }
  if (insecure && f.head_mode && !f.no_dashboard && !dashboard::IsLoopbackHost(f.dashboard_host) &&
      !f.insecure_allow_remote) {
    std::cerr << "orrery start: --insecure with --dashboard-host " << f.dashboard_host
              << " would show this cluster to anyone who reaches this host; add "
                 "--insecure-allow-remote if that "
                 "is really meant (docs/security.md)\n";
    return 2;
  }
  if (insecure && !f.credentials.token_file.empty()) {
    std::cerr << "orrery start: --insecure and --token-file contradict each other\n";
    return 2;
  }
  return 0;
}

// Starts `argv` as a daemon of the session that writes <session dir>/<name>.ready (its log
// logs/<name>.log), records its pid, and waits until it is ready.
Result<ReadyInfo> StartDaemon(Session& s, std::vector<std::string> argv, const std::string& name) {
  std::string ready = s.dir + "/" + name + ".ready", log = s.dir + "/logs/" + name + ".log";
  argv.insert(argv.end(), {"--ready-file", ready});
  auto pid = SpawnDaemon(argv, log);
  if (!pid.ok()) return pid.status();
  s.pids.push_back(pid.value());
  if (name == "node") s.values["node_pid"] = std::to_string(pid.value());
  s.Save();
  return WaitForReadyFile(ready, pid.value(), log, "it");
}

// Starts Redis (unless --redis-address; else checks that one answers) and the head; sets
// the head's address. Returns the exit code to fail with (0: started).
int StartHeadSide(Session& s, StartFlags& f, std::string* head_address) {
  auto redis_password = WriteSessionRedisPassword(s, f.redis_password_file, f.redis_address);
  if (!redis_password.ok()) return Fail("Redis password: " + redis_password.status().message(), &s);
  s.Save();
  if (f.redis_address.empty()) {
    auto address = StartSessionRedis(s, redis_password.value());
    if (!address.ok()) return Fail(address.status().message(), &s);
    f.redis_address = address.value();
  } else if (auto store =
                 RedisStateStore::Connect(f.redis_address, "default", redis_password.value());
             !store.ok()) {
    return Fail(store.status().message(), &s);
  }
  std::vector<std::string> argv{SelfExe(), "head", "--port",          std::to_string(f.port),
                                "--bind",  f.bind, "--redis-address", f.redis_address};
  for (auto& a : CredentialArgs(s)) argv.push_back(a);
  if (!f.advertise.empty()) argv.insert(argv.end(), {"--advertise-address", f.advertise});
  argv.insert(argv.end(), {"--metrics-port", std::to_string(f.metrics_port)});
  if (!s.values["redis_password_file"].empty())
    argv.insert(argv.end(), {"--redis-password-file", s.values["redis_password_file"]});
  argv.insert(argv.end(), {"--history-ttl", f.history_ttl});
  auto head = StartDaemon(s, argv, "head");
  if (!head.ok()) return Fail("the head did not start: " + head.status().message(), &s);
  *head_address = head->address;
  s.values["head_metrics_address"] = head->extra["metrics_address"];
  s.values["redis_address"] = f.redis_address;
  return 0;
}

int StartNode(Session& s, const std::string& head, const StartFlags& f) {
  std::vector<std::string> argv{SelfExe(), "node", "--address", head, "--bind", f.bind};
  if (!f.advertise.empty()) argv.insert(argv.end(), {"--advertise-address", f.advertise});
  for (auto& a : CredentialArgs(s)) argv.push_back(a);
  ResourceFlags node_flags = f.resources;
  if (node_flags.log_dir.empty()) node_flags.log_dir = s.dir + "/logs";  // beside the daemons'
  node_flags.AppendTo(argv);
  int metrics_port = f.head_mode ? std::min(f.metrics_port, 0) : f.metrics_port;
  argv.insert(argv.end(), {"--metrics-port", std::to_string(metrics_port)});
  auto node = StartDaemon(s, argv, "node");
  if (!node.ok()) return Fail("the node did not start: " + node.status().message(), &s);
  s.values["node_metrics_address"] = node->extra["metrics_address"];
  s.Save();
  return 0;
}

void PrintHeadStarted(Session& s, const StartFlags& f, const std::string& head_address,
                      const std::string& dashboard_url) {
  std::cout << "Orrery head started at " << head_address << " (Redis at " << f.redis_address
            << ").\n";
  if (!dashboard_url.empty()) std::cout << "  Dashboard:           " << dashboard_url << "\n";
  if (!s.values["head_metrics_address"].empty()) {
    std::cout << "  Head metrics:        http://" << s.values["head_metrics_address"]
              << "/metrics (for Prometheus: orrery metrics targets --out FILE)\n";
  }
  bool insecure = f.credentials.insecure;
  std::string token = s.dir + "/token";
  std::cout << "  Join another node:   orrery start --address " << head_address
            << (insecure ? " --insecure" : " --token-file <a copy of " + token + ", mode 0600>")
            << "\n"
            << "  Connect a driver:    ORRERY_ADDRESS=" << head_address << " ./your_program"
            << (insecure ? "  (with ORRERY_INSECURE=1)"
                         : "  (on another host also ORRERY_TOKEN_FILE=<copy of the token>)")
            << "\n";
  if (!insecure) std::cout << "  Cluster token:       " << token << " (keep it secret)\n";
  if (!s.values["redis_password_file"].empty()) {
    std::cout << "  Redis password:      " << s.values["redis_password_file"]
              << " (keep it secret)\n";
  }
  std::cout << "  Status:              orrery status\n"
            << "  Stop:                orrery stop\n";
}

// --block: waits for SIGTERM/SIGINT or for a process of the session to exit, then stops
// the session's processes.
int Block(Session& s) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  timespec tick{0, 200 * 1000 * 1000};
  while (true) {
    if (sigtimedwait(&set, nullptr, &tick) > 0) break;
    bool all = true;
    for (int pid : s.pids) all = all && ProcessExists(pid);
    if (!all) {
      std::cerr << "orrery: a process of this session exited; stopping the rest\n";
      break;
    }
  }
  StopProcesses(s.pids);
  return 0;
}

// The node, unless this host's node of a restarted head still runs; then the dashboard.
// Returns the exit code to fail with (0: started) and sets the dashboard's URL ("" for none).
int StartNodeAndDashboard(Session& s, const StartFlags& f, const std::string& head_address,
                          std::string* dashboard_url) {
  // A head restarted where it ran before is rejoined by the node this host already
  // runs for it; a second node here would count the host twice.
  if (int node = f.head_mode ? LiveNodeFor(head_address) : 0; node > 0) {
    std::cout << "This host's node (pid " << node << ") still runs for " << head_address
              << " and rejoins the head; not starting another.\n";
  } else if (int rc = StartNode(s, head_address, f)) {
    return rc;
  }
  if (f.head_mode && !f.no_dashboard) {
    // A dashboard that cannot start (port in use) is not worth failing the cluster for.
    auto url = StartDashboardDaemon(s, f.redis_address, f.dashboard_host, f.dashboard_port);
    if (url.ok()) {
      *dashboard_url = url.value();
    } else {
      std::cerr << "orrery start: warning: no dashboard: " << url.status().message() << "\n";
    }
  }
  return 0;
}

}  // namespace

CLI::App* AddStartCommand(CLI::App& app, StartFlags* f) {
  auto* start =
      app.add_subcommand("start", "start a head (--head) or a node joining one (--address)");
  start->add_flag("--head", f->head_mode,
                  "start Redis (unless --redis-address), a head and a node here");
  start->add_option("--port", f->port, "the head's port (0: any free port)")
      ->check(CLI::Range(0, 65535));
  start->add_option("--redis-address", f->redis_address,
                    "use this Redis (host:port) instead of starting one");
  start->add_option(
      "--redis-password-file", f->redis_password_file,
      "with --head: the Redis password (one line, mode 0600): of the --redis-address Redis, or for "
      "the Redis started here instead of a random one (default $ORRERY_REDIS_PASSWORD_FILE)");
  start->add_option("--address", f->join_address, "join the head at host:port");
  start->add_option("--bind", f->bind,
                    "address to bind, and to advertise unless --advertise-address (default "
                    "127.0.0.1)");
  AddAdvertiseFlag(start, &f->advertise);
  start->add_flag("--block", f->block, "stay in the foreground; Ctrl-C stops what was started");
  start->add_flag("--no-dashboard", f->no_dashboard, "with --head: do not start the dashboard");
  start
      ->add_option("--dashboard-port", f->dashboard_port,
                   "with --head: the dashboard's port (default 8265; 0: any free port)")
      ->check(CLI::Range(0, 65535));
  start->add_option(
      "--dashboard-host", f->dashboard_host,
      "with --head: the address the dashboard binds (default 127.0.0.1; any other requires the "
      "cluster token to log in)");
  f->resources.Add(start);
  start->add_option("--token-file", f->credentials.token_file,
                    "the cluster token: with --head, use this one instead of a new random one; "
                    "with --address, the "
                    "head's (default $ORRERY_TOKEN_FILE, else this host's session of that head)");
  start->add_flag(
      "--insecure", f->credentials.insecure,
      "no authentication or encryption: anyone who reaches the ports controls the cluster");
  start
      ->add_option("--metrics-port", f->metrics_port,
                   "Prometheus metrics at http://<bind>:P/metrics of the head (--head) or the "
                   "node (--address); 0: any free port (default); -1: none")
      ->check(CLI::Range(-1, 65535));
  start->add_flag("--insecure-allow-remote", f->insecure_allow_remote,
                  "allow --insecure together with a --bind address other than loopback");
  start->add_option("--history-ttl", f->history_ttl, kHistoryTtlHelp)
      ->check(CLI::Validator(CheckDuration, "DURATION"));
  return start;
}

int RunStart(StartFlags f) {
  f.resources.Parsed();  // validate before starting anything
  f.resources.LogRotateBytes();
  if (int rc = CheckFlags(f)) return rc;
  if (f.credentials.insecure) {
    std::cerr << "orrery start: WARNING: --insecure: no authentication or encryption; anyone "
                 "who can reach "
                 "this cluster's ports can run code on its nodes\n";
  }
  // The address the head will have, when already known (a fixed --port).
  std::string host = !f.advertise.empty()  ? f.advertise
                     : f.bind == "0.0.0.0" ? "127.0.0.1"
                                           : f.bind;
  std::string planned_head = f.head_mode && f.port != 0 ? host + ":" + std::to_string(f.port) : "";
  Session s = NewSession();
  if (Status ts =
          WriteSessionToken(s, f.credentials, f.head_mode ? "" : f.join_address, planned_head);
      !ts.ok()) {
    return Fail(ts.message(), &s);
  }
  s.Save();
  std::string head_address = f.join_address;
  if (f.head_mode) {
    if (int rc = StartHeadSide(s, f, &head_address)) return rc;
  }
  s.values["head_address"] = head_address;
  s.Save();
  std::string dashboard_url;
  if (int rc = StartNodeAndDashboard(s, f, head_address, &dashboard_url)) return rc;
  PublishSession(s);  // only now do later commands and drivers pick this session
  if (f.head_mode) {
    PrintHeadStarted(s, f, head_address, dashboard_url);
  } else {
    std::cout << "Orrery node joined the head at " << head_address << ".\n";
  }
  if (!s.values["node_metrics_address"].empty())
    std::cout << "  Node metrics:        http://" << s.values["node_metrics_address"]
              << "/metrics\n";
  std::cout << "  Logs: " << s.dir << "/logs\n";
  return f.block ? Block(s) : 0;
}

}  // namespace orrery::cli
