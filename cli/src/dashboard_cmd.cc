#include "cli/src/dashboard_cmd.h"

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>
#include <vector>

#include "core/src/redis_store.h"
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
  for (auto& s : LiveSessions()) {
    if (!s.values["redis_address"].empty()) found = s.values["redis_address"];
  }
  return found;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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
  dashboard::DashboardOptions options;
  options.redis_address = flags.redis_address;
  options.redis_password = password.value();
  options.host = flags.host;
  options.port = flags.port;
  dashboard::Dashboard d(options);
  auto port = d.Start();
  if (!port.ok()) {
    std::cerr << "orrery dashboard: " << port.status().message() << "\n";
    return 1;
  }
  std::cout << kBanner << d.url() << " (Redis at " << flags.redis_address << ")" << std::endl;
  int sig = 0;
  sigwait(&set, &sig);
  d.Stop();
  return 0;
}

Result<std::string> StartDashboardDaemon(Session& session, const std::string& redis_address,
                                         int port) {
  std::string log = session.dir + "/logs/dashboard.log";
  std::vector<std::string> argv{SelfExe(), "dashboard", "--redis-address", redis_address};
  argv.insert(argv.end(), {"--host", "127.0.0.1", "--port", std::to_string(port)});
  auto password_file = session.values.find("redis_password_file");
  if (password_file != session.values.end() && !password_file->second.empty()) {
    argv.insert(argv.end(), {"--redis-password-file", password_file->second});
  }
  auto pid = SpawnDaemon(argv, log);
  if (!pid.ok()) return pid.status();
  // Wait (with a deadline) for the banner, which carries the port actually bound.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    std::string content = ReadFile(log);
    size_t at = content.find(kBanner);
    if (at != std::string::npos) {
      size_t from = at + std::string(kBanner).size();
      std::string url = content.substr(from, content.find_first_of(" \n", from) - from);
      session.pids.push_back(pid.value());
      session.Save();
      return url;
    }
    // The daemon is our child: once it exits it stays a zombie (still "alive" to kill 0)
    // until reaped here.
    if (waitpid(pid.value(), nullptr, WNOHANG) == pid.value() || !Alive(pid.value())) {
      std::string why = content.empty() ? "it exited" : content.substr(0, content.find('\n'));
      return Status::Unavailable(why + " (see " + log + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a file with a deadline
  }
  kill(pid.value(), SIGKILL);
  waitpid(pid.value(), nullptr, 0);
  return Status::Timeout("the dashboard did not start within 15 s (see " + log + ")");
}

}  // namespace orrery::cli
