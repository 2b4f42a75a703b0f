#include "tests/cluster/cluster_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

extern char** environ;

namespace orrery_cluster {

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

int Spawn(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

void KillHard(int pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  int status;
  waitpid(pid, &status, 0);
}

std::string CliPath() { return ORRERY_CLI_PATH; }


namespace {
bool LogHas(const std::string& log, const std::string& needle) {
  std::ifstream in(log);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return content.find(needle) != std::string::npos;
}
}  // namespace

Cluster::Cluster() {
  char tmpl[] = "/tmp/orrery_cluster_test_XXXXXX";
  dir_ = mkdtemp(tmpl);
  // Daemons keep their files (fetched executables, sessions) under this test's directory.
  setenv("ORRERY_TMPDIR", dir_.c_str(), 1);
}

Cluster::~Cluster() {
  for (int pid : node_pids_) KillHard(pid);
  KillHard(head_pid_);
  KillHard(redis_pid_);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void Cluster::StartHead(double health_period_s, int health_threshold) {
  health_period_s_ = health_period_s;
  health_threshold_ = health_threshold;
  if (redis_pid_ < 0) {
    int rport = FreePort();
    std::string log = dir_ + "/redis.log";
    redis_pid_ = Spawn({"redis-server", "--port", std::to_string(rport), "--bind", "127.0.0.1", "--dir", dir_,
                        "--appendonly", "yes", "--save", ""},
                       log);
    redis_address_ = "127.0.0.1:" + std::to_string(rport);
    if (!WaitFor([&] { return LogHas(log, "Ready to accept connections"); })) throw std::runtime_error("redis did not start");
  }
  if (head_address_.empty()) head_address_ = "127.0.0.1:" + std::to_string(FreePort());
  std::string port = head_address_.substr(head_address_.rfind(':') + 1);
  std::string log = dir_ + "/head.log";
  std::ofstream(log, std::ios::trunc).close();
  head_pid_ = Spawn({CliPath(), "head", "--port", port, "--redis-address", redis_address_, "--health-check-period-s",
                     std::to_string(health_period_s_), "--health-check-failure-threshold", std::to_string(health_threshold_)},
                    log);
  if (!WaitFor([&] { return LogHas(log, "head listening on"); })) throw std::runtime_error("the head did not start");
}

int Cluster::AddNode(const std::string& resources_json, const std::string& labels, int cpus) {
  return AddNodeWithFlags(resources_json, labels, cpus, {});
}

int Cluster::AddNodeWithFlags(const std::string& resources_json, const std::string& labels, int cpus,
                              const std::vector<std::string>& extra_flags) {
  std::string log = dir_ + "/node" + std::to_string(node_pids_.size()) + ".log";
  std::vector<std::string> argv{CliPath(), "node", "--address", head_address_, "--num-cpus", std::to_string(cpus),
                                "--heartbeat-s", std::to_string(health_period_s_)};
  if (!resources_json.empty()) argv.insert(argv.end(), {"--resources", resources_json});
  if (!labels.empty()) argv.insert(argv.end(), {"--labels", labels});
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  int pid = Spawn(argv, log);
  node_pids_.push_back(pid);
  if (!WaitFor([&] { return LogHas(log, " up at "); })) throw std::runtime_error("a node did not start; see " + log);
  return pid;
}

int Cluster::AddNodeWithEnv(const std::string& sysroot, const std::vector<std::pair<std::string, std::string>>& env,
                            const std::string& labels, int cpus, const std::vector<std::string>& extra_flags) {
  std::filesystem::create_directories(sysroot);
  setenv("ORRERY_SYSROOT", sysroot.c_str(), 1);
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  int pid = -1;
  try {
    pid = AddNodeWithFlags("", labels, cpus, extra_flags);
  } catch (...) {
    unsetenv("ORRERY_SYSROOT");
    for (const auto& kv : env) unsetenv(kv.first.c_str());
    throw;
  }
  unsetenv("ORRERY_SYSROOT");
  for (const auto& kv : env) unsetenv(kv.first.c_str());
  return pid;
}

int Cluster::AddTpuV4Node(const std::string& slice, int worker, const std::string& labels, int cpus) {
  std::string root = dir_ + "/tpu_" + slice + "_" + std::to_string(worker);
  for (int i = 0; i < 4; ++i) {
    std::filesystem::create_directories(root + "/dev");
    std::ofstream(root + "/dev/accel" + std::to_string(i)).close();
    std::string sys = root + "/sys/class/accel/accel" + std::to_string(i) + "/device";
    std::filesystem::create_directories(sys);
    std::ofstream(sys + "/vendor") << "0x1ae0\n";
  }
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
  return AddNodeWithEnv(sysroot, {}, labels, cpus, extra_flags);
}

int Cluster::AddCpuNode(const std::string& labels, int cpus) {
  return AddNodeWithEnv(dir_ + "/cpu_host" + std::to_string(node_pids_.size()), {}, labels, cpus);
}

}  // namespace orrery_cluster
