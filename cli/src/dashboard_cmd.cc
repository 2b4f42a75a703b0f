#include "cli/src/dashboard_cmd.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>
#include <vector>

#include "cli/src/ready_file.h"
#include "core/internal/redis_store.h"
#include "core/internal/security.h"
#include "dashboard/internal/auth.h"
#include "orrery/dashboard.h"

namespace orrery::cli {

namespace {

constexpr const char* kBanner = "Dashboard at ";

// The Redis of this host's latest head session (as `orrery status` finds it): the latest
// session if it knows one, else any live session that does.
std::string SessionRedis() {
  auto latest = LatestSession();
  if (latest.ok() && !latest->values["redis_address"].empty())
    return latest->values["redis_address"];
  std::string found;
  for (auto& s : StartedSessions()) {
    if (!s.values["redis_address"].empty()) found = s.values["redis_address"];
  }
  return found;
}

// The token file of this host's session whose Redis is `redis_address`: "" when none is
// known or that session runs insecure.
std::string SessionTokenFile(const std::string& redis_address) {
  std::vector<Session> sessions;
  if (auto latest = LatestSession(); latest.ok()) sessions.push_back(latest.value());
  for (auto& s : StartedSessions()) sessions.push_back(s);
  for (auto& s : sessions) {
    if (s.values["redis_address"] != redis_address) continue;
    if (s.values["insecure"] == "1") return "";
    std::string file = s.dir + "/token";
    if (access(file.c_str(), F_OK) == 0) return file;
  }
  return "";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The cluster token a dashboard requires when others can reach it (not loopback, not
// --insecure): --token-file, else $ORRERY_TOKEN_FILE, else this host's session of its Redis.
// Sets options->token; returns the exit code to fail with (0: go on) after saying why.
int ResolveToken(const DashboardFlags& flags, dashboard::DashboardOptions* options,
                 std::string* token_file) {
  if (flags.insecure || dashboard::IsLoopbackHost(flags.host)) return 0;
  // Only a dashboard that others can reach needs the token (loopback stays open).
  *token_file = flags.token_file;
  const char* env = std::getenv("ORRERY_TOKEN_FILE");
  if (token_file->empty() && env) *token_file = env;
  if (token_file->empty()) *token_file = SessionTokenFile(flags.redis_address);
  if (token_file->empty()) {
    std::cerr << "orrery dashboard: --host " << flags.host
              << " serves other hosts, so the dashboard requires the cluster token, and none was "
                 "found: pass "
                 "--token-file F (or set ORRERY_TOKEN_FILE; `orrery start --head` writes "
                 "<session dir>/token), "
                 "bind --host 127.0.0.1, or add --insecure to serve it without authentication\n";
    return 1;
  }
  auto token = security::ReadTokenFile(*token_file);
  if (!token.ok()) {
    std::cerr << "orrery dashboard: " << token.status().message() << "\n";
    return 1;
  }
  options->token = token.value();
  return 0;
}

// The Redis to read and its password, in `options`; the exit code to fail with (0: go on).
int ResolveRedis(DashboardFlags& flags, dashboard::DashboardOptions* options) {
  if (flags.redis_address.empty()) flags.redis_address = SessionRedis();
  if (flags.redis_address.empty()) {
    std::cerr << "orrery dashboard: no cluster found on this host; pass --redis-address HOST:PORT "
                 "(or start one "
                 "with `orrery start --head`)\n";
    return 1;
  }
  auto password = RedisPasswordFor(flags.redis_password_file, flags.redis_address);
  if (!password.ok()) {
    std::cerr << "orrery dashboard: Redis password: " << password.status().message() << "\n";
    return 1;
  }
  // A refused password is a mistake to report now, not on every page (an unreachable Redis
  // may come back, and the pages say so).
  if (auto probe = RedisStateStore::Connect(flags.redis_address, "default", password.value());
      !probe.ok() && probe.status().code() == StatusCode::kPermissionDenied) {
    std::cerr << "orrery dashboard: " << probe.status().message() << "\n";
    return 1;
  }
  options->redis_address = flags.redis_address;
  options->redis_password = password.value();
  return 0;
}

// Once serving: the banner, the URL to open (printed, or in --url-file), the readiness file.
int AnnounceServing(dashboard::Dashboard& d, const DashboardFlags& flags,
                    const std::string& token_file, bool token_required, int port) {
  std::string open_url = d.login_url();
  std::cout << kBanner << d.url() << " (Redis at " << flags.redis_address << ")" << std::endl;
  if (!flags.url_file.empty()) {
    // The ticket is a credential: it goes to a 0600 file, never to the (readable) log.
    if (Status w = security::WriteSecretFile(flags.url_file, open_url); !w.ok()) {
      std::cerr << "orrery dashboard: " << w.message() << "\n";
      return 1;
    }
  } else if (token_required) {
    std::cout << "  Log in once with this URL: " << open_url << "\n"
              << "  (or with the cluster token " << token_file
              << "; scripts send 'Authorization: Bearer <token>')" << std::endl;
  }
  if (!flags.ready_file.empty()) {
    if (Status w = WriteReadyFile(flags.ready_file, d.url(), port); !w.ok()) {
      std::cerr << "orrery dashboard: " << w.message() << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace

int RunDashboard(DashboardFlags flags) {
  // Block the stop signals before any thread starts, so only sigwait below sees them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A Redis or browser that hangs up mid-write must cost a request, not the process.
  signal(SIGPIPE, SIG_IGN);
  dashboard::DashboardOptions options;
  if (int rc = ResolveRedis(flags, &options)) return rc;
  options.host = flags.host;
  options.port = flags.port;
  options.insecure = flags.insecure;
  options.max_connections_per_address = flags.max_connections_per_address;
  if (flags.insecure && !flags.token_file.empty()) {
    std::cerr << "orrery dashboard: --insecure and --token-file contradict each other\n";
    return 2;
  }
  std::string token_file;
  if (int rc = ResolveToken(flags, &options, &token_file)) return rc;
  if (flags.insecure && !dashboard::IsLoopbackHost(flags.host)) {
    std::cerr << "orrery dashboard: WARNING: --insecure with --host " << flags.host
              << ": the dashboard is served WITHOUT authentication; anyone who can reach this port "
                 "can read "
                 "the whole cluster's state\n";
  }
  // The cluster's credentials, for /api/workers and /api/tasks (asked of the nodes and
  // drivers themselves): the token found above, else this host's session of its Redis.
  // An explicit --token-file counts even for a loopback dashboard: `orrery start` passes it
  // before its session is published, so no session lookup could find it yet.
  std::string cluster_token = !token_file.empty()         ? token_file
                              : !flags.token_file.empty() ? flags.token_file
                                                          : SessionTokenFile(flags.redis_address);
  if (!security::UseCredentials(flags.insecure || cluster_token.empty(), cluster_token, "").ok())
    std::cerr << "orrery dashboard: the cluster token " << cluster_token
              << " is unusable: /api/workers and /api/tasks will not get answers\n";
  dashboard::Dashboard d(options);
  auto port = d.Start();
  if (!port.ok()) {
    std::cerr << "orrery dashboard: " << port.status().message() << "\n";
    return 1;
  }
  int rc = AnnounceServing(d, flags, token_file, !options.token.empty(), port.value());
  if (rc == 0) {
    int sig = 0;
    sigwait(&set, &sig);
  }
  d.Stop();
  return rc;
}

CLI::App* AddDashboardCommand(CLI::App& app, DashboardFlags* df) {
  auto* dash = app.add_subcommand(
      "dashboard", "serve the web dashboard of a cluster (reads its Redis) until Ctrl-C");
  dash->add_option("--redis-address", df->redis_address,
                   "the cluster's Redis (host:port); default: this host's latest session");
  dash->add_option(
      "--redis-password-file", df->redis_password_file,
      "its password (default $ORRERY_REDIS_PASSWORD_FILE, else this host's session of that Redis)");
  dash->add_option("--host", df->host, "address to bind (default 127.0.0.1)");
  dash->add_option("--port", df->port, "port to serve on (default 8265; 0: any free port)")
      ->check(CLI::Range(0, 65535));
  dash->add_option("--token-file", df->token_file,
                   "the cluster token, required with a --host other than loopback (default "
                   "$ORRERY_TOKEN_FILE, else "
                   "the token of this host's session of that Redis)");
  dash->add_flag("--insecure", df->insecure,
                 "serve a --host other than loopback without authentication");
  dash->add_option("--max-connections-per-address", df->max_connections_per_address,
                   "connections one client address may hold open (default 32; raise it behind "
                   "a reverse proxy)")
      ->check(CLI::Range(1, 512));
  dash->add_option("--url-file", df->url_file,
                   "write the URL to open to this file (0600) instead of printing it")
      ->group("");
  dash->add_option("--ready-file", df->ready_file,
                   "once serving, write {\"pid\",\"address\",\"port\"} as JSON to this file "
                   "(docs/cli.md)");
  return dash;
}

Result<std::string> StartDashboardDaemon(Session& session, const std::string& redis_address,
                                         const std::string& host, int port) {
  std::string log = session.dir + "/logs/dashboard.log";
  std::string url_file = session.dir + "/dashboard_url";
  std::string ready_file = session.dir + "/dashboard.ready";
  unlink(url_file.c_str());
  unlink(ready_file.c_str());
  std::vector<std::string> argv{SelfExe(),    "dashboard", "--redis-address", redis_address,
                                "--host",     host,        "--port",          std::to_string(port),
                                "--url-file", url_file,    "--ready-file",    ready_file};
  if (session.values["insecure"] == "1") {
    argv.push_back("--insecure");
  } else {
    argv.insert(argv.end(), {"--token-file", session.dir + "/token"});
  }
  auto password_file = session.values.find("redis_password_file");
  if (password_file != session.values.end() && !password_file->second.empty()) {
    argv.insert(argv.end(), {"--redis-password-file", password_file->second});
  }
  auto pid = SpawnDaemon(argv, log);
  if (!pid.ok()) return pid.status();
  // The URL file is written before the readiness file; it carries, when the token is
  // required, a one-time ticket.
  auto ready = WaitForReadyFile(ready_file, pid.value(), log, "the dashboard");
  std::string url = ready.ok() ? ReadFile(url_file) : "";
  unlink(url_file.c_str());  // printed once; the ticket is not kept around
  while (!url.empty() && std::isspace(static_cast<unsigned char>(url.back()))) url.pop_back();
  if (!ready.ok() || url.empty()) {
    StopProcesses({pid.value()});
    return ready.ok() ? Status::Unavailable("the dashboard wrote no URL (see " + log + ")")
                      : ready.status();
  }
  session.pids.push_back(pid.value());
  session.Save();
  return url;
}

}  // namespace orrery::cli
