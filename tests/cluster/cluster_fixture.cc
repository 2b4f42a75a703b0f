#include "tests/cluster/cluster_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/internal/security.h"
#include "core/internal/session_dir.h"
#include "tests/cluster/redis_client.h"

extern char** environ;

namespace orrery_cluster {

DeadPort::DeadPort() {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error(std::string("cannot bind a loopback port: ") + std::strerror(errno));
  }
  port_ = ntohs(addr.sin_port);
}

DeadPort::~DeadPort() {
  if (fd_ >= 0) close(fd_);
}

std::string LogTail(const std::string& log, int lines) {
  std::ifstream in(log);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    tail.push_back(line);
    if (int(tail.size()) > lines) tail.pop_front();
  }
  std::string out;
  for (const auto& l : tail) out += "  " + l + "\n";
  return out;
}

namespace {

// Whether `pid` (a child of this process) has exited; reaps it.
bool Exited(int pid) { return waitpid(pid, nullptr, WNOHANG) == pid || kill(pid, 0) != 0; }

std::runtime_error StartError(const std::string& what, const std::string& log) {
  return std::runtime_error(what + "; the last lines of " + log + ":\n" + LogTail(log));
}

Ready ParseReady(const std::string& path, int pid, const std::string& log) {
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  auto integer = [&](const char* k) { return j.contains(k) && j[k].is_number_integer(); };
  auto text = [&](const char* k) { return j.contains(k) && j[k].is_string(); };
  if (!j.is_object() || !integer("pid") || !integer("port") || !text("address"))
    throw StartError("a malformed readiness file " + path, log);
  Ready r;
  r.pid = j["pid"].get<int>();
  r.port = j["port"].get<int>();
  r.address = j["address"].get<std::string>();
  if (text("node_id")) r.node_id = j["node_id"].get<std::string>();
  if (r.pid != pid) throw StartError(path + " names pid " + std::to_string(r.pid), log);
  return r;
}

// A loopback port free now: only a candidate (StartRedisServer retries when it is taken).
int CandidatePort() {
  DeadPort held;
  return held.port();
}

// Redis on `port` answers PING as the process `pid` (not another one holding the port).
bool RedisServes(int port, const std::string& password, int pid) {
  Redis r(port, password);
  if (!r.ok() || !r.auth_error().empty()) return false;
  auto pong = r.Strings({"PING"});  // an error while it loads its append-only file
  if (pong.empty() || pong[0] != "PONG") return false;
  auto info = r.Strings({"INFO", "server"});
  return !info.empty() &&
         info[0].find("\nprocess_id:" + std::to_string(pid) + "\r") != std::string::npos;
}

}  // namespace

Ready WaitReady(const std::string& path, int pid, const std::string& log, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    // Renamed into place whole: a file that exists is complete.
    if (access(path.c_str(), F_OK) == 0) return ParseReady(path, pid, log);
    if (Exited(pid)) throw StartError("process " + std::to_string(pid) + " exited", log);
    if (std::chrono::steady_clock::now() >= deadline)
      throw StartError("process " + std::to_string(pid) + " was not ready in time", log);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::pair<int, int> StartRedisServer(
    const std::function<int(const std::vector<std::string>&, const std::string&)>& spawn,
    const std::string& conf_path, const std::string& conf_lines, const std::string& password,
    const std::string& log, int port) {
  const int attempts = port ? 1 : 5;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    int p = port ? port : CandidatePort();
    orrery::Status written = orrery::security::WriteSecretFile(
        conf_path, "port " + std::to_string(p) + "\n" + conf_lines);
    if (!written.ok()) throw std::runtime_error(written.message());
    int pid = spawn({"redis-server", conf_path}, log);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!Exited(pid)) {
      // Ready only once the append-only file is loaded (PING answers PONG).
      if (RedisServes(p, password, pid)) return {pid, p};
      if (std::chrono::steady_clock::now() >= deadline) {
        KillHard(pid);
        throw StartError("redis-server was not ready in time", log);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // It exited: most likely the port was taken meanwhile; another one.
  }
  throw StartError("redis-server did not start", log);
}

// The environment of this process with `env` replacing or adding variables.
static std::vector<std::string> EnvWith(
    const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (const auto& [k, v] : env) replaced = replaced || k == key;
    if (!replaced) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  return envs;
}

int Spawn(const std::vector<std::string>& argv, const std::string& log,
          const std::vector<std::pair<std::string, std::string>>& env) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<std::string> envs = EnvWith(env);
  std::vector<char*> cenv;
  for (auto& e : envs) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

namespace {

// argv0 as execve needs it: itself when it has a slash, else its first match on PATH.
std::string Resolve(const std::string& argv0) {
  if (argv0.find('/') != std::string::npos) return argv0;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/" + argv0;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return argv0;
}

}  // namespace

// Forks and execs on its own thread, with PR_SET_PDEATHSIG: the kernel sends SIGKILL to a
// daemon when the thread that forked it ends, so one long-lived thread does every fork, and
// a test process that crashes or is killed (a ctest timeout) takes its daemons with it.
class Cluster::Spawner {
 public:
  Spawner() : thread_([this] { Loop(); }) {}
  ~Spawner() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  int Spawn(const std::vector<std::string>& argv, const std::string& log,
            const std::vector<std::pair<std::string, std::string>>& env = {}) {
    std::packaged_task<int()> job([&] { return ForkExec(argv, log, env); });
    std::future<int> pid = job.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_all();
    int out = pid.get();
    if (out < 0) throw std::runtime_error("cannot start " + argv[0]);
    return out;
  }

 private:
  static int ForkExec(const std::vector<std::string>& argv, const std::string& log,
                      const std::vector<std::pair<std::string, std::string>>& env) {
    // Everything the child needs is built before fork(): after it, only async-signal-safe calls.
    std::string exe = Resolve(argv[0]);
    std::vector<std::string> envs = EnvWith(env);
    std::vector<char*> cargv, cenv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    for (auto& e : envs) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);  // the test died before the line above
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(127);
      execve(exe.c_str(), cargv.data(), cenv.data());
      _exit(127);
    }
    return pid;
  }
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<int()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

void KillHard(int pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  int status;
  waitpid(pid, &status, 0);
}

bool StopProcess(int pid, int timeout_ms) {
  if (kill(pid, SIGSTOP) != 0) return false;
  std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  return WaitFor(
      [&] {
        std::error_code ec;
        for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
          std::ifstream stat(task.path() / "stat");
          std::string line;
          std::getline(stat, line);
          // The state follows the command name, which is in parentheses and may hold spaces.
          size_t end = line.rfind(") ");
          if (end == std::string::npos || end + 2 >= line.size()) continue;  // the thread ended
          char state = line[end + 2];
          if (state != 'T' && state != 't' && state != 'Z' && state != 'X') return false;
        }
        return !ec;
      },
      timeout_ms);
}

std::string CliPath() { return ORRERY_CLI_PATH; }

std::pair<int, std::string> RunCli(const std::string& args) {
  std::string cmd = CliPath() + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed: " + std::string(strerror(errno))};
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

Cluster::Cluster() : spawner_(std::make_unique<Spawner>()) {
  char tmpl[] = "/tmp/orrery_cluster_test_XXXXXX";
  dir_ = mkdtemp(tmpl);
  // Daemons keep their files (fetched executables, sessions) under this test's directory.
  setenv("ORRERY_TMPDIR", dir_.c_str(), 1);
  // The cluster's token (docs/security.md), as `orrery start --head` makes one: the daemons,
  // drivers started by the test and the test process itself find it in ORRERY_TOKEN_FILE.
  // Raw sockets a test opens (security::ConfigureClient) present it too.
  token_file_ = dir_ + "/token";
  orrery::Status written =
      orrery::security::WriteSecretFile(token_file_, orrery::security::NewToken());
  if (!written.ok()) throw std::runtime_error(written.message());
  setenv("ORRERY_TOKEN_FILE", token_file_.c_str(), 1);
  auto used = orrery::security::UseCredentials(false, token_file_, "");
  if (!used.ok()) throw std::runtime_error(used.status().message());
}

int Cluster::SpawnTied(const std::vector<std::string>& argv, const std::string& log,
                       const std::vector<std::pair<std::string, std::string>>& env) {
  return spawner_->Spawn(argv, log, env);
}

Cluster::~Cluster() {
  for (int pid : node_pids_) KillHard(pid);
  KillHard(head_pid_);
  KillHard(redis_pid_);
  spawner_.reset();
  std::error_code ec;
  // What a node killed with SIGKILL leaves (docs/objects.md "Lifetime"): its arena file and
  // its (empty) spill directory.
  std::string spill = orrery::SessionRoot() + "/spill/node-";
  for (const auto& id : node_ids_) {
    std::filesystem::remove("/dev/shm/orrery-" + id, ec);
    std::filesystem::remove_all(spill + id, ec);
  }
  if (!keep_dir_) std::filesystem::remove_all(dir_, ec);
}

void Cluster::StartHead(double health_period_s, int health_threshold) {
  health_period_s_ = health_period_s;
  health_threshold_ = health_threshold;
  if (redis_pid_ < 0 && redis_address_.empty()) {
    redis_dir_ = dir_;
    // Redis has a password, as `orrery start --head` gives it one; the test process and the
    // programs it starts (drivers, `orrery status`) find it in ORRERY_REDIS_PASSWORD_FILE.
    redis_password_file_ = dir_ + "/redis_password";
    orrery::Status written =
        orrery::security::WriteSecretFile(redis_password_file_, orrery::security::NewToken());
    if (!written.ok()) throw std::runtime_error(written.message());
    setenv("ORRERY_REDIS_PASSWORD_FILE", redis_password_file_.c_str(), 1);
    StartRedis(0, redis_dir_);
  }
  // The first head binds any free port; a restarted one the same port, where the nodes and
  // drivers look for it.
  std::string port =
      head_address_.empty() ? "0" : head_address_.substr(head_address_.rfind(':') + 1);
  // A restarted head writes a new log, so the previous one stays for the post-mortem.
  std::string name = heads_++ == 0 ? "head" : "head." + std::to_string(heads_ - 1);
  std::string log = dir_ + "/" + name + ".log", ready = dir_ + "/" + name + ".ready";
  std::ofstream(log, std::ios::trunc).close();
  head_pid_ =
      spawner_->Spawn({CliPath(), "head", "--port", port, "--redis-address", redis_address_,
                       "--health-check-period-s", std::to_string(health_period_s_),
                       "--health-check-failure-threshold", std::to_string(health_threshold_),
                       "--redis-password-file", redis_password_file_, "--ready-file", ready},
                      log);
  Ready r = WaitReady(ready, head_pid_, log);
  head_address_ = r.address;
}

void Cluster::StartRedis(int port, const std::string& dir) {
  std::string n = std::to_string(redis_restarts_++);
  std::string log = dir_ + "/redis." + n + ".log", conf = dir_ + "/redis." + n + ".conf";
  // The password goes in a config file (0600), never on the command line.
  std::ifstream password_in(redis_password_file_);
  std::string password;
  std::getline(password_in, password);
  auto [pid, bound] = StartRedisServer(
      [this](const std::vector<std::string>& argv, const std::string& l) {
        return spawner_->Spawn(argv, l);
      },
      conf,
      "bind 127.0.0.1\ndir \"" + dir + "\"\nappendonly yes\nsave \"\"\nrequirepass " + password,
      password, log, port);
  redis_pid_ = pid;
  redis_address_ = "127.0.0.1:" + std::to_string(bound);
}

void Cluster::RestartRedis(bool empty) {
  if (redis_pid_ > 0) KillRedis();
  if (empty) {
    redis_dir_ = dir_ + "/redis_empty" + std::to_string(redis_restarts_);
    std::filesystem::create_directories(redis_dir_);
  }
  StartRedis(std::atoi(redis_address_.c_str() + redis_address_.rfind(':') + 1), redis_dir_);
}

int Cluster::AddNode(const std::string& resources_json, const std::string& labels, int cpus) {
  return AddNodeWithEnv("", {}, labels, cpus, resources_json);
}

int Cluster::StartNode(const NodeSpec& spec) {
  std::string name = dir_ + "/node" + std::to_string(logs_++);
  std::string log = name + ".log", ready = name + ".ready";
  std::vector<std::string> argv = spec.argv;
  argv.insert(argv.end(), {"--ready-file", ready});
  int pid = spawner_->Spawn(argv, log, spec.env);
  try {
    node_ids_.push_back(WaitReady(ready, pid, log).node_id);
  } catch (const std::runtime_error&) {
    KillHard(pid);
    throw;
  }
  return pid;
}

void Cluster::KillNode(size_t index) {
  KillHard(node_pids_.at(index));
  node_pids_[index] = -1;
}

int Cluster::RestartNode(size_t index) {
  KillNode(index);
  node_pids_[index] = StartNode(node_specs_.at(index));
  return node_pids_[index];
}

int Cluster::AddNodeWithEnv(const std::string& sysroot,
                            const std::vector<std::pair<std::string, std::string>>& env,
                            const std::string& labels, int cpus, const std::string& resources_json,
                            const std::vector<std::string>& extra_flags) {
  NodeSpec spec;
  spec.argv = {CliPath(),       "node",
               "--address",     head_address_,
               "--num-cpus",    std::to_string(cpus),
               "--heartbeat-s", std::to_string(health_period_s_)};
  if (!resources_json.empty()) spec.argv.insert(spec.argv.end(), {"--resources", resources_json});
  if (!labels.empty()) spec.argv.insert(spec.argv.end(), {"--labels", labels});
  spec.argv.insert(spec.argv.end(), extra_flags.begin(), extra_flags.end());
  spec.env = env;
  if (!sysroot.empty()) {
    std::filesystem::create_directories(sysroot);
    spec.env.emplace_back("ORRERY_SYSROOT", sysroot);
  }
  int pid = StartNode(spec);
  node_pids_.push_back(pid);
  node_specs_.push_back(std::move(spec));
  return pid;
}

int Cluster::AddTpuV4Node(const std::string& slice, int worker, const std::string& labels,
                          int cpus) {
  std::string root = dir_ + "/tpu_" + slice + "_" + std::to_string(worker);
  MakeTpuHostRoot(root);
  return AddNodeWithEnv(root,
                        {{"TPU_ACCELERATOR_TYPE", "v4-16"},
                         {"TPU_TOPOLOGY", "2x2x2"},
                         {"TPU_WORKER_ID", std::to_string(worker)},
                         {"TPU_NAME", slice},
                         {"TPU_WORKER_HOSTNAMES", slice + "-0," + slice + "-1"}},
                        labels, cpus);
}

int Cluster::AddTwoGpuNode(const std::string& labels, int cpus) {
  std::string root = dir_ + "/gpu_host" + std::to_string(node_pids_.size());
  std::filesystem::create_directories(root + "/usr/bin");
  std::ofstream(root + "/usr/bin/nvidia-smi")
      << "#!/bin/sh\necho '0, NVIDIA A100-SXM4-40GB'\necho '1, NVIDIA A100-SXM4-40GB'\n";
  std::filesystem::permissions(root + "/usr/bin/nvidia-smi", std::filesystem::perms::owner_all);
  return AddNodeWithEnv(root, {}, labels, cpus);
}

int Cluster::AddNodeWithSysroot(const std::string& sysroot, const std::string& labels, int cpus,
                                const std::vector<std::string>& extra_flags) {
  return AddNodeWithEnv(sysroot, {}, labels, cpus, "", extra_flags);
}

int Cluster::AddCpuNode(const std::string& labels, int cpus) {
  return AddNodeWithEnv(dir_ + "/cpu_host" + std::to_string(node_pids_.size()), {}, labels, cpus);
}

}  // namespace orrery_cluster
