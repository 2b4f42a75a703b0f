// The `orrery` command (DESIGN.md section 8). Parses flags and wires components; the work
// is in session.cc (launching daemons), daemons.cc and inspect.cc.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "cli/src/daemons.h"
#include "cli/src/dashboard_cmd.h"
#include "cli/src/inspect.h"
#include "cli/src/session.h"
#include "core/src/redis_store.h"
#include "core/src/security.h"
#include "dashboard/src/auth.h"
#include "orrery/errors.h"
#include "orrery/orrery.h"
#include "orrery/resources.h"

namespace oc = orrery::cli;

namespace {

struct ResourceFlags {
  int num_cpus = -1;
  double memory = -1;
  std::string resources_json;
  std::string labels;
  std::string memory_usage_threshold;  // as typed; validated by Parsed()
  std::string memory_monitor_refresh_ms;
  void Add(CLI::App* app) {
    app->add_option("--num-cpus", num_cpus, "CPUs this node offers (default: all cores)")
        ->check(CLI::NonNegativeNumber);
    app->add_option("--memory", memory, "memory this node offers, in bytes")
        ->check(CLI::NonNegativeNumber);
    app->add_option("--resources", resources_json, "custom resources as JSON, e.g. '{\"GPU\": 2}'");
    app->add_option("--labels", labels, "node labels: k=v,k2=v2");
    app->add_option("--memory-usage-threshold", memory_usage_threshold,
                    "kill a worker when more than this fraction of memory is in use, 0 < t <= 1 "
                    "(default $ORRERY_MEMORY_USAGE_THRESHOLD, else 0.95)");
    app->add_option("--memory-monitor-refresh-ms", memory_monitor_refresh_ms,
                    "how often the memory monitor reads memory; 0: it kills nothing "
                    "(default $ORRERY_MEMORY_MONITOR_REFRESH_MS, else 250)");
  }
  // Throws orrery::ConfigError on malformed values.
  orrery::Config Parsed() const {
    std::vector<std::string> args{"orrery"};
    if (!resources_json.empty()) args.push_back("--orrery-resources=" + resources_json);
    if (!labels.empty()) args.push_back("--orrery-labels=" + labels);
    // The memory monitor's settings: the flag, else the environment (as a driver's Config).
    std::map<std::string, std::string> typed = {{"--orrery-resources", "--resources"},
                                                {"--orrery-labels", "--labels"}};
    for (auto [name, value] :
         {std::pair{std::string("memory-usage-threshold"), memory_usage_threshold},
          std::pair{std::string("memory-monitor-refresh-ms"), memory_monitor_refresh_ms}}) {
      std::string from = "--" + name;
      if (value.empty()) {
        std::string env = "ORRERY_";
        for (char ch : name) env.push_back(ch == '-' ? '_' : char(std::toupper(ch)));
        const char* v = std::getenv(env.c_str());
        if (!v || !*v) continue;
        value = v;
        from = env;
      }
      args.push_back("--orrery-" + name + "=" + value);
      typed["--orrery-" + name] = from;
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int argc = int(args.size());
    orrery::Config c;
    try {
      c = orrery::ApplyFlags(orrery::Config{}, &argc, argv.data());
    } catch (const orrery::ConfigError& e) {
      // Name the flag the user typed, not the --orrery-* form used to parse it.
      std::string m = e.what();
      for (const auto& [internal, shown] : typed) {
        size_t at = m.find(internal);
        if (at != std::string::npos) m.replace(at, internal.size(), shown);
      }
      throw orrery::ConfigError(m);
    }
    orrery::Status s = orrery::ValidateResources(c.resources);
    if (!s.ok()) throw orrery::ConfigError("--resources: " + s.message());
    return c;
  }
  void AppendTo(std::vector<std::string>& argv) const {
    if (num_cpus >= 0) argv.insert(argv.end(), {"--num-cpus", std::to_string(num_cpus)});
    if (memory >= 0) argv.insert(argv.end(), {"--memory", std::to_string((long long)memory)});
    if (!resources_json.empty()) argv.insert(argv.end(), {"--resources", resources_json});
    if (!labels.empty()) argv.insert(argv.end(), {"--labels", labels});
    if (!memory_usage_threshold.empty())
      argv.insert(argv.end(), {"--memory-usage-threshold", memory_usage_threshold});
    if (!memory_monitor_refresh_ms.empty()) {
      argv.insert(argv.end(), {"--memory-monitor-refresh-ms", memory_monitor_refresh_ms});
    }
  }
};

// Waits (with a deadline) until `log` contains `needle`, or the process dies.
bool WaitForLog(const std::string& log, const std::string& needle, int pid, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(log);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (content.find(needle) != std::string::npos) return true;
    // A child that exited stays a zombie (kill(pid, 0) succeeds) until reaped: reap it here.
    if (waitpid(pid, nullptr, WNOHANG) == pid || !oc::Alive(pid)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a file with a deadline
  }
  return false;
}

void StopPids(const std::vector<int>& pids) {
  for (auto it = pids.rbegin(); it != pids.rend(); ++it)
    if (oc::Alive(*it)) kill(*it, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (int pid : pids) {
    while (oc::Alive(pid) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(20));  // waiting for exit with a deadline
    }
    if (oc::Alive(pid)) kill(pid, SIGKILL);
  }
}

int Fail(const std::string& message, oc::Session* session = nullptr) {
  std::cerr << "orrery start: " << message << "\n";
  if (session) {
    StopPids(session->pids);
    oc::ForgetFailedSession(*session);
  }
  return 1;
}

// How the session's daemons authenticate: its token file, or --insecure.
std::vector<std::string> CredentialArgs(const oc::Session& s) {
  auto it = s.values.find("insecure");
  if (it != s.values.end() && it->second == "1") return {"--insecure"};
  return {"--token-file", s.dir + "/token"};
}

// Adds --token-file/--insecure to a daemon or inspection subcommand.
void AddCredentialFlags(CLI::App* app, oc::CredentialFlags* flags) {
  app->add_option(
      "--token-file", flags->token_file,
      "the cluster token (default $ORRERY_TOKEN_FILE, else this host's session of that head)");
  app->add_flag("--insecure", flags->insecure,
                "no authentication or encryption (a cluster started with --insecure)");
}

// The session's token (docs/security.md): the one given (--token-file, $ORRERY_TOKEN_FILE),
// else for a head a new random one, else the one of this host's session of that head;
// written to <session dir>/token with mode 0600.
orrery::Status WriteSessionToken(oc::Session& s, const oc::CredentialFlags& flags,
                                 const std::string& join_address,
                                 const std::string& restarted_head = "") {
  if (flags.insecure) {
    s.values["insecure"] = "1";
    return orrery::Status::Ok();
  }
  std::string file = flags.token_file;
  if (file.empty()) {
    const char* env = std::getenv("ORRERY_TOKEN_FILE");
    if (env && *env) file = env;
  }
  if (file.empty() && !join_address.empty())
    file = orrery::security::FindSessionTokenFile(join_address);
  if (file.empty() && join_address.empty() && !restarted_head.empty()) {
    // A head started again where it ran: this host's node of that head still runs and holds
    // the old token, so the cluster keeps it.
    for (auto& live : oc::LiveSessions()) {
      if (live.values["head_address"] == restarted_head && !live.values.count("insecure")) {
        std::error_code ec;
        if (std::filesystem::exists(live.dir + "/token", ec)) file = live.dir + "/token";
      }
    }
  }
  std::string token;
  if (!file.empty()) {
    auto t = orrery::security::ReadTokenFile(file);
    if (!t.ok()) return t.status();
    token = t.value();
  } else if (join_address.empty()) {
    token = orrery::security::NewToken();
  } else {
    return orrery::Status::PermissionDenied(
        "no cluster token for " + join_address +
        ": copy the head's <session dir>/token to this host (mode 0600) and pass "
        "--token-file F (or set ORRERY_TOKEN_FILE)");
  }
  return orrery::security::WriteSecretFile(s.dir + "/token", token);
}

// A value for redis.conf: quoted, so a path or password with spaces stays one argument.
std::string RedisConfQuoted(const std::string& v) {
  std::string out = "\"";
  for (char ch : v) {
    if (ch == '"' || ch == '\\') out.push_back('\\');
    out.push_back(ch);
  }
  return out + "\"";
}

// The session's Redis password (docs/redis-schema.md "Password"): the one given
// (--redis-password-file, $ORRERY_REDIS_PASSWORD_FILE, or for an external Redis the file of
// this host's session that uses it), else for a Redis started here a new random one; written
// to <session dir>/redis_password (0600) and recorded as the session's "redis_password_file".
// An external Redis without a password leaves no file. Returns the password.
orrery::Result<std::string> WriteSessionRedisPassword(oc::Session& s, const std::string& file,
                                                      const std::string& external_redis) {
  auto given = oc::RedisPasswordFor(file, external_redis);
  if (!given.ok()) return given.status();
  std::string password = given.value();
  if (password.empty() && external_redis.empty()) password = orrery::security::NewToken();
  if (password.empty()) return password;
  std::string path = s.dir + "/redis_password";
  if (orrery::Status w = orrery::security::WriteSecretFile(path, password); !w.ok()) return w;
  s.values["redis_password_file"] = path;
  return password;
}

// Starts redis-server for the session on `port`, configured by <session dir>/redis.conf
// (0600: it holds the password, which therefore never appears on a command line).
orrery::Result<int> StartSessionRedis(oc::Session& s, int port, const std::string& password) {
  std::string conf = s.dir + "/redis.conf";
  std::string text = "port " + std::to_string(port) + "\nbind 127.0.0.1\ndir " +
                     RedisConfQuoted(s.dir) + "\nappendonly yes\ndaemonize no\nrequirepass " +
                     RedisConfQuoted(password);
  if (orrery::Status w = orrery::security::WriteSecretFile(conf, text); !w.ok()) return w;
  return oc::SpawnDaemon({"redis-server", conf}, s.dir + "/logs/redis.log");
}

int StartNode(oc::Session& s, const std::string& head, const ResourceFlags& rf,
              const std::string& bind) {
  std::string log = s.dir + "/logs/node.log";
  std::vector<std::string> argv{oc::SelfExe(), "node", "--address", head, "--bind", bind};
  for (auto& a : CredentialArgs(s)) argv.push_back(a);
  rf.AppendTo(argv);
  auto pid = oc::SpawnDaemon(argv, log);
  if (!pid.ok()) return Fail(pid.status().message(), &s);
  s.pids.push_back(pid.value());
  s.values["node_pid"] = std::to_string(pid.value());
  s.Save();
  if (!WaitForLog(log, " up at ", pid.value(), 15000))
    return Fail("the node did not start; see " + log, &s);
  return 0;
}

int Block(oc::Session& s) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  timespec tick{0, 200 * 1000 * 1000};
  while (true) {
    if (sigtimedwait(&set, nullptr, &tick) > 0) break;
    bool all = true;
    for (int pid : s.pids) all = all && oc::Alive(pid);
    if (!all) {
      std::cerr << "orrery: a process of this session exited; stopping the rest\n";
      break;
    }
  }
  StopPids(s.pids);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  CLI::App app{"orrery: start, inspect and stop Orrery clusters"};
  app.require_subcommand(1);

  // orrery start
  auto* start =
      app.add_subcommand("start", "start a head (--head) or a node joining one (--address)");
  bool head_mode = false, block = false;
  int port = 6380;
  std::string redis_address, join_address, bind = "127.0.0.1";
  ResourceFlags rf;
  start->add_flag("--head", head_mode,
                  "start Redis (unless --redis-address), a head and a node here");
  start->add_option("--port", port, "the head's port (0: any free port)")
      ->check(CLI::Range(0, 65535));
  start->add_option("--redis-address", redis_address,
                    "use this Redis (host:port) instead of starting one");
  std::string start_redis_password_file;
  start->add_option(
      "--redis-password-file", start_redis_password_file,
      "with --head: the Redis password (one line, mode 0600): of the --redis-address Redis, or for "
      "the Redis started here instead of a random one (default $ORRERY_REDIS_PASSWORD_FILE)");
  start->add_option("--address", join_address, "join the head at host:port");
  start->add_option("--bind", bind, "address to bind and advertise (default 127.0.0.1)");
  start->add_flag("--block", block, "stay in the foreground; Ctrl-C stops what was started");
  bool no_dashboard = false;
  int dashboard_port = 8265;
  start->add_flag("--no-dashboard", no_dashboard, "with --head: do not start the dashboard");
  start
      ->add_option("--dashboard-port", dashboard_port,
                   "with --head: the dashboard's port (default 8265; 0: any free port)")
      ->check(CLI::Range(0, 65535));
  std::string dashboard_host = "127.0.0.1";
  start->add_option(
      "--dashboard-host", dashboard_host,
      "with --head: the address the dashboard binds (default 127.0.0.1; any other requires the "
      "cluster token to log in)");
  rf.Add(start);
  oc::CredentialFlags start_credentials;
  bool insecure_allow_remote = false;
  start->add_option("--token-file", start_credentials.token_file,
                    "the cluster token: with --head, use this one instead of a new random one; "
                    "with --address, the "
                    "head's (default $ORRERY_TOKEN_FILE, else this host's session of that head)");
  start->add_flag(
      "--insecure", start_credentials.insecure,
      "no authentication or encryption: anyone who reaches the ports controls the cluster");
  start->add_flag("--insecure-allow-remote", insecure_allow_remote,
                  "allow --insecure together with a --bind address other than loopback");

  // orrery dashboard
  oc::DashboardFlags df;
  auto* dash = app.add_subcommand(
      "dashboard", "serve the web dashboard of a cluster (reads its Redis) until Ctrl-C");
  dash->add_option("--redis-address", df.redis_address,
                   "the cluster's Redis (host:port); default: this host's latest session");
  dash->add_option(
      "--redis-password-file", df.redis_password_file,
      "its password (default $ORRERY_REDIS_PASSWORD_FILE, else this host's session of that Redis)");
  dash->add_option("--host", df.host, "address to bind (default 127.0.0.1)");
  dash->add_option("--port", df.port, "port to serve on (default 8265; 0: any free port)")
      ->check(CLI::Range(0, 65535));
  dash->add_option("--token-file", df.token_file,
                   "the cluster token, required with a --host other than loopback (default "
                   "$ORRERY_TOKEN_FILE, else "
                   "the token of this host's session of that Redis)");
  dash->add_flag("--insecure", df.insecure,
                 "serve a --host other than loopback without authentication");
  dash->add_option("--url-file", df.url_file,
                   "write the URL to open to this file (0600) instead of printing it")
      ->group("");

  // orrery stop / status / list
  auto* stop = app.add_subcommand("stop", "stop what `orrery start` started on this host");
  oc::InspectFlags inspect;
  auto* status =
      app.add_subcommand("status", "nodes with used/total resources, actors, placement groups");
  auto* list = app.add_subcommand("list", "list nodes|actors|placement-groups|jobs|runs");
  std::string what;
  list->add_option("what", what, "nodes, actors, placement-groups, jobs or runs")->required();
  for (auto* sub : {status, list}) {
    sub->add_option("--address", inspect.address,
                    "the head (host:port); default: this host's latest session");
    sub->add_option("--redis-address", inspect.redis_address, "the cluster's Redis (host:port)");
    sub->add_option("--redis-password-file", inspect.redis_password_file,
                    "its password (default $ORRERY_REDIS_PASSWORD_FILE, else this host's session "
                    "of that Redis)");
    sub->add_flag("--json", inspect.json, "print JSON");
  }
  oc::CredentialFlags inspect_credentials;
  for (auto* sub : {status, list}) AddCredentialFlags(sub, &inspect_credentials);

  // Daemons (started by `orrery start`).
  oc::HeadFlags hf;
  auto* head = app.add_subcommand("head", "run a head daemon in the foreground");
  head->add_option("--port", hf.port)->check(CLI::Range(0, 65535));
  head->add_option("--bind", hf.bind);
  head->add_option("--redis-address", hf.redis_address);
  head->add_option("--redis-password-file", hf.redis_password_file,
                   "default $ORRERY_REDIS_PASSWORD_FILE");
  head->add_option("--health-check-period-s", hf.health_period_s)->check(CLI::PositiveNumber);
  head->add_option("--health-check-failure-threshold", hf.health_threshold)
      ->check(CLI::PositiveNumber);
  AddCredentialFlags(head, &hf.credentials);
  oc::NodeFlags nf;
  ResourceFlags nrf;
  auto* node = app.add_subcommand("node", "run a node daemon in the foreground");
  node->add_option("--address", nf.address, "the head (host:port)")->required();
  node->add_option("--bind", nf.bind);
  node->add_option("--heartbeat-s", nf.heartbeat_s)->check(CLI::PositiveNumber);
  AddCredentialFlags(node, &nf.credentials);
  nrf.Add(node);

  CLI11_PARSE(app, argc, argv);

  try {
    if (*head) return oc::RunHead(hf);
    if (*dash) return oc::RunDashboard(df);
    if (*node) {
      orrery::Config c = nrf.Parsed();
      nf.num_cpus = nrf.num_cpus;
      nf.memory = nrf.memory;
      nf.memory_usage_threshold = c.memory_usage_threshold;
      nf.memory_monitor_refresh_ms = c.memory_monitor_refresh_ms;
      nf.resources = c.resources;
      nf.labels = c.labels;
      return oc::RunNode(nf);
    }
    if (*start) {
      rf.Parsed();  // validate before starting anything
      if (head_mode == !join_address.empty()) {
        std::cerr << "orrery start: give exactly one of --head and --address HOST:PORT\n";
        return 2;
      }
      if (start_credentials.insecure && !orrery::dashboard::IsLoopbackHost(bind) &&
          !insecure_allow_remote) {
        std::cerr << "orrery start: --insecure with --bind " << bind
                  << " would let anyone who reaches this host run code on it; add "
                     "--insecure-allow-remote if that is "
                     "really meant (docs/security.md)\n";
        return 2;
      }
      if (start_credentials.insecure && head_mode && !no_dashboard &&
          !orrery::dashboard::IsLoopbackHost(dashboard_host) && !insecure_allow_remote) {
        std::cerr << "orrery start: --insecure with --dashboard-host " << dashboard_host
                  << " would show this cluster to anyone who reaches this host; add "
                     "--insecure-allow-remote if that "
                     "is really meant (docs/security.md)\n";
        return 2;
      }
      if (start_credentials.insecure && !start_credentials.token_file.empty()) {
        std::cerr << "orrery start: --insecure and --token-file contradict each other\n";
        return 2;
      }
      if (start_credentials.insecure) {
        std::cerr << "orrery start: WARNING: --insecure: no authentication or encryption; anyone "
                     "who can reach "
                     "this cluster's ports can run code on its nodes\n";
      }
      // The address the head will have, when already known (a fixed --port).
      std::string planned_head = head_mode && port != 0 ? (bind == "0.0.0.0" ? "127.0.0.1" : bind) +
                                                              ":" + std::to_string(port)
                                                        : "";
      oc::Session s = oc::NewSession();
      if (orrery::Status ts =
              WriteSessionToken(s, start_credentials, head_mode ? "" : join_address, planned_head);
          !ts.ok()) {
        return Fail(ts.message(), &s);
      }
      s.Save();
      std::string head_address;
      if (head_mode) {
        auto redis_password =
            WriteSessionRedisPassword(s, start_redis_password_file, redis_address);
        if (!redis_password.ok())
          return Fail("Redis password: " + redis_password.status().message(), &s);
        s.Save();
        if (redis_address.empty()) {
          int rport = oc::FreePort();
          std::string log = s.dir + "/logs/redis.log";
          auto pid = StartSessionRedis(s, rport, redis_password.value());
          if (!pid.ok()) return Fail(pid.status().message() + " (is redis-server installed?)", &s);
          s.pids.push_back(pid.value());
          redis_address = "127.0.0.1:" + std::to_string(rport);
          if (!WaitForLog(log, "Ready to accept connections", pid.value(), 15000)) {
            return Fail("Redis did not start; see " + log, &s);
          }
        } else if (auto store = orrery::RedisStateStore::Connect(redis_address, "default",
                                                                 redis_password.value());
                   !store.ok()) {
          return Fail(store.status().message(), &s);
        }
        if (port == 0) port = oc::FreePort();
        std::string log = s.dir + "/logs/head.log";
        std::vector<std::string> head_argv{oc::SelfExe(),        "head",       "--port",
                                           std::to_string(port), "--bind",     bind,
                                           "--redis-address",    redis_address};
        for (auto& a : CredentialArgs(s)) head_argv.push_back(a);
        if (!s.values["redis_password_file"].empty()) {
          head_argv.insert(head_argv.end(),
                           {"--redis-password-file", s.values["redis_password_file"]});
        }
        auto pid = oc::SpawnDaemon(head_argv, log);
        if (!pid.ok()) return Fail(pid.status().message(), &s);
        s.pids.push_back(pid.value());
        s.Save();
        if (!WaitForLog(log, "head listening on", pid.value(), 15000))
          return Fail("the head did not start; see " + log, &s);
        head_address = (bind == "0.0.0.0" ? "127.0.0.1" : bind) + ":" + std::to_string(port);
        s.values["redis_address"] = redis_address;
      } else {
        head_address = join_address;
      }
      s.values["head_address"] = head_address;
      s.Save();
      // A head restarted where it ran before is rejoined by the node this host already
      // runs for it; a second node here would count the host twice.
      if (int node = head_mode ? oc::LiveNodeFor(head_address) : 0; node > 0) {
        std::cout << "This host's node (pid " << node << ") still runs for " << head_address
                  << " and rejoins the head; not starting another.\n";
      } else if (int rc = StartNode(s, head_address, rf, bind)) {
        return rc;
      }
      std::string dashboard_url;
      if (head_mode && !no_dashboard) {
        // A dashboard that cannot start (port in use) is not worth failing the cluster for.
        auto url = oc::StartDashboardDaemon(s, redis_address, dashboard_host, dashboard_port);
        if (url.ok()) {
          dashboard_url = url.value();
        } else {
          std::cerr << "orrery start: warning: no dashboard: " << url.status().message() << "\n";
        }
      }
      if (head_mode) {
        std::cout << "Orrery head started at " << head_address << " (Redis at " << redis_address
                  << ").\n";
        if (!dashboard_url.empty()) std::cout << "  Dashboard:           " << dashboard_url << "\n";
        bool insecure = start_credentials.insecure;
        std::string token = s.dir + "/token";
        std::cout << "  Join another node:   orrery start --address " << head_address
                  << (insecure ? " --insecure"
                               : " --token-file <a copy of " + token + ", mode 0600>")
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
      } else {
        std::cout << "Orrery node joined the head at " << head_address << ".\n";
      }
      std::cout << "  Logs: " << s.dir << "/logs\n";
      if (block) return Block(s);
      return 0;
    }
    if (*stop) {
      auto sessions = oc::LiveSessions();
      for (auto& s : sessions) {
        StopPids(s.pids);
        std::cout << "stopped " << s.pids.size() << " process(es) of " << s.dir << "\n";
      }
      if (sessions.empty()) std::cout << "nothing to stop\n";
      return 0;
    }
    if (*status || *list) {
      auto latest = oc::LatestSession();
      const char* env = std::getenv("ORRERY_ADDRESS");
      if (inspect.address.empty() && env && *env) inspect.address = env;
      if (inspect.address.empty() && latest.ok()) inspect.address = latest->values["head_address"];
      if (inspect.redis_address.empty() && latest.ok() &&
          latest->values["head_address"] == inspect.address) {
        inspect.redis_address = latest->values["redis_address"];
      }
      if (inspect.redis_address.empty()) {
        // A node-only session does not know Redis: take it from this host's head session.
        for (auto& s : oc::LiveSessions()) {
          if (s.values["head_address"] == inspect.address && !s.values["redis_address"].empty()) {
            inspect.redis_address = s.values["redis_address"];
          }
        }
      }
      if (!inspect.redis_address.empty()) {
        auto password = oc::RedisPasswordFor(inspect.redis_password_file, inspect.redis_address);
        if (!password.ok()) {
          std::cerr << "orrery: Redis password: " << password.status().message() << "\n";
          return 2;
        }
        inspect.redis_password = password.value();
      }
      {
        auto used = oc::UseDaemonCredentials(inspect_credentials, inspect.address);
        if (!used.ok()) {
          std::cerr << "orrery: " << used.status().message() << "\n";
          return 2;
        }
        if (!inspect.address.empty()) {
          std::string head = inspect.address.find("://") == std::string::npos
                                 ? "tcp://" + inspect.address
                                 : inspect.address;
          if (orrery::Status p = orrery::security::ProbeHandshake(head, 2000);
              p.code() == orrery::StatusCode::kPermissionDenied) {
            std::cerr << "orrery: "
                      << orrery::security::AuthFailedMessage(head,
                                                             orrery::security::ProcessCredentials())
                      << "\n";
            return 2;
          }
        }
      }
      return *status ? oc::Status(inspect) : oc::List(what, inspect);
    }
  } catch (const orrery::Error& e) {
    std::cerr << "orrery: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
