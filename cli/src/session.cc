#include "cli/src/session.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/internal/process_exists.h"
#include "core/internal/redis_store.h"

extern char** environ;

namespace orrery::cli {

namespace fs = std::filesystem;

void Session::Save() const {
  nlohmann::json j{{"values", values}, {"pids", pids}};
  std::ofstream(dir + "/session.json") << j.dump(2) << "\n";
}

bool Session::started() const {
  auto it = values.find("started");
  return it != values.end() && it->second == "1";
}

static Result<Session> Load(const std::string& dir) {
  std::ifstream in(dir + "/session.json");
  if (!in) return Status::NotFound("no session in " + dir);
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    Session s;
    s.dir = dir;
    s.values = j.at("values").get<std::map<std::string, std::string>>();
    s.pids = j.at("pids").get<std::vector<int>>();
    return s;
  } catch (const std::exception& e) {
    return Status::InvalidArgument("bad session file in " + dir + ": " + e.what());
  }
}

Session NewSession() {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  Session s;
  s.dir = SessionRoot() + "/session_" +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()) + "_" +
          std::to_string(getpid());
  std::error_code ec;
  fs::create_directories(SessionRoot(), ec);
  SpreadSubfolders(SessionRoot());
  fs::create_directories(s.dir + "/logs");
  return s;
}

void PublishSession(Session& s) {
  s.values["started"] = "1";
  s.Save();
  // A new link renamed over the old one: a reader sees the old session or the new one.
  std::string latest = SessionRoot() + "/session_latest";
  std::string tmp = latest + ".tmp_" + std::to_string(getpid());
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_symlink(s.dir, tmp, ec);
  if (!ec) fs::rename(tmp, latest, ec);
  if (ec) fs::remove(tmp, ec);
}

void DiscardFailedSession(const Session& failed) {
  std::error_code ec;
  fs::remove(failed.dir + "/token", ec);
}

std::vector<Session> LiveSessions() {
  std::vector<Session> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(SessionRoot(), ec)) {
    if (!entry.is_directory() || entry.is_symlink()) continue;
    auto s = Load(entry.path().string());
    if (!s.ok()) continue;
    for (int pid : s->pids) {
      if (ProcessExists(pid)) {
        out.push_back(s.value());
        break;
      }
    }
  }
  return out;
}

int LiveNodeFor(const std::string& head_address) {
  for (auto& s : LiveSessions()) {
    if (s.values["head_address"] != head_address) continue;
    int pid = std::atoi(s.values["node_pid"].c_str());
    if (ProcessExists(pid)) return pid;
  }
  return 0;
}

std::vector<Session> StartedSessions() {
  std::vector<Session> out;
  for (auto& s : LiveSessions())
    if (s.started()) out.push_back(std::move(s));
  return out;
}

Result<Session> LatestSession() { return Load(SessionRoot() + "/session_latest"); }

std::string SessionRedisPasswordFile(const std::string& redis_address) {
  if (redis_address.empty()) return "";
  std::vector<Session> sessions = StartedSessions();
  if (auto latest = LatestSession(); latest.ok()) sessions.insert(sessions.begin(), latest.value());
  for (auto& s : sessions) {
    if (s.values["redis_address"] == redis_address && !s.values["redis_password_file"].empty()) {
      return s.values["redis_password_file"];
    }
  }
  return "";
}

Result<std::string> RedisPasswordFor(const std::string& file, const std::string& redis_address) {
  std::string path = file;
  if (path.empty()) {
    const char* env = std::getenv("ORRERY_REDIS_PASSWORD_FILE");
    if (env && *env) path = env;
  }
  if (path.empty()) path = SessionRedisPasswordFile(redis_address);
  if (path.empty()) return std::string();
  return ReadRedisPassword(path);
}

Result<int> SpawnDaemon(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0].c_str(), &actions, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Status::Unavailable("cannot start " + argv[0] + ": " + std::strerror(rc));
  return int(pid);
}

void StopProcesses(const std::vector<int>& pids) {
  for (auto it = pids.rbegin(); it != pids.rend(); ++it)
    if (ProcessExists(*it)) kill(*it, SIGTERM);
  // A child of this process that exited stays a zombie (it exists) until reaped here.
  auto running = [](int pid) {
    return waitpid(pid, nullptr, WNOHANG) != pid && ProcessExists(pid);
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (int pid : pids) {
    while (running(pid) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // waiting for exit, deadline
    }
    if (running(pid)) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, WNOHANG);
    }
  }
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, size_t(n)) : "orrery";
}

}  // namespace orrery::cli
