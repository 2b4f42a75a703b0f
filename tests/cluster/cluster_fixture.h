// A real cluster on loopback for tests: redis-server, an `orrery head` daemon and node
// daemons, each its own process on an ephemeral port, stopped (SIGKILL) by the destructor,
// and killed by the kernel if the test process dies first (crash, ctest timeout). The
// daemons bind port 0 and say which port they got in their readiness files.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/fakes/tpu_host.h"

namespace orrery_cluster {

// Waits for `cond` with a deadline, checking every few milliseconds.
inline bool WaitFor(const std::function<bool()>& cond, int timeout_ms = 20000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

// A loopback TCP port held bound but not listening for as long as this lives: connecting to
// it is refused, and no other process can take it meanwhile (a peer that is surely dead).
class DeadPort {
 public:
  DeadPort();
  ~DeadPort();
  DeadPort(const DeadPort&) = delete;
  DeadPort& operator=(const DeadPort&) = delete;
  int port() const { return port_; }
  std::string address() const { return "tcp://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// What a daemon given --ready-file wrote once serving (docs/cli.md "Readiness files").
struct Ready {
  int pid = 0;
  std::string address;  // host:port
  int port = 0;
  std::string node_id;  // a node's
};
// Waits for the readiness file `path` of the daemon `pid` (a child of this process). Throws
// std::runtime_error, with the last lines of its `log`, when it exits first, writes another
// pid, or is not ready by the deadline.
Ready WaitReady(const std::string& path, int pid, const std::string& log, int timeout_ms = 20000);

// Starts redis-server through `spawn` (argv, log -> pid) with the config file `conf_path`:
// `conf_lines` (without a port line) and the port. On `port`, or when 0 on a loopback port
// chosen here: Redis cannot report a port of its own choosing, so when another process takes
// the chosen one first (redis-server exits), another is tried, a few times. Waits until it
// answers PING (after AUTH `password`, "" for none) as the process started. Returns {pid, port};
// throws std::runtime_error, with the last lines of `log`, when it does not start.
std::pair<int, int> StartRedisServer(
    const std::function<int(const std::vector<std::string>&, const std::string&)>& spawn,
    const std::string& conf_path, const std::string& conf_lines, const std::string& password,
    const std::string& log, int port = 0);

// The last `lines` lines of the file `log`.
std::string LogTail(const std::string& log, int lines = 20);

// Starts argv (stdout/stderr appended to `log`) with this process's environment plus
// `env`, returns the pid.
int Spawn(const std::vector<std::string>& argv, const std::string& log,
          const std::vector<std::pair<std::string, std::string>>& env = {});
void KillHard(int pid);
// Sends SIGSTOP to `pid` and waits until every thread of it has stopped: kill() returns
// before they have, and on a busy machine a thread may run on for a while, serving what the
// caller meant to reach a stopped process. False when they have not stopped within timeout_ms.
bool StopProcess(int pid, int timeout_ms = 20000);
// Writes a fake TPU host under `root` (for ORRERY_SYSROOT): four Google chips.
using ::orrery::testing::MakeTpuHostRoot;
std::string CliPath();
// Runs `orrery ARGS` (a shell word list) to its end: its exit code (-1 when a signal ended
// it) and its stdout and stderr together.
std::pair<int, std::string> RunCli(const std::string& args);

class Cluster {
 public:
  Cluster();
  ~Cluster();
  // Starts Redis and the head (with the given health-check settings).
  void StartHead(double health_period_s = 0.2, int health_threshold = 3);
  void KillHead() {
    KillHard(head_pid_);
    head_pid_ = -1;
  }
  // Kills redis-server (SIGKILL), then starts it again on the same port: with its data
  // directory as it was, so it reloads its append-only file (what it acknowledged before
  // the kill survives), or (`empty`) with a fresh one, as if Redis had lost everything.
  void KillRedis() {
    KillHard(redis_pid_);
    redis_pid_ = -1;
  }
  void RestartRedis(bool empty = false);
  // Returns the node daemon's pid.
  int AddNode(const std::string& extra_flags_json_resources, const std::string& labels, int cpus);
  // Kills node `index` (in the order added) if it still runs and starts a node with the
  // same flags and environment; it registers with a new id. Returns the new pid.
  int RestartNode(size_t index);
  // Kills node `index` (SIGKILL); RestartNode brings it back.
  void KillNode(size_t index);
  // Simulated hosts (a node whose ORRERY_SYSROOT is a fake host under dir()), each returning
  // the node's pid: worker `worker` of a v4-16 slice (2x2x2, two hosts) named `slice`, with
  // four Google TPU chips; a host with two A100 GPUs; and a host with no accelerator (so the
  // real machine's devices are not detected).
  int AddTpuV4Node(const std::string& slice, int worker, const std::string& labels, int cpus);
  int AddTwoGpuNode(const std::string& labels, int cpus);
  int AddCpuNode(const std::string& labels, int cpus);
  // A node whose host is the fake tree `sysroot` (what the test wrote there, e.g. a
  // /proc/meminfo for the memory monitor); `extra_flags` go to `orrery node`.
  int AddNodeWithSysroot(const std::string& sysroot, const std::string& labels, int cpus,
                         const std::vector<std::string>& extra_flags = {});
  // Starts another process of the test's (stdout/stderr to `log`) that dies with the test
  // process as the daemons do; the caller stops it. Returns its pid.
  int SpawnTied(const std::vector<std::string>& argv, const std::string& log,
                const std::vector<std::pair<std::string, std::string>>& env = {});
  const std::string& head_address() const { return head_address_; }
  const std::string& dir() const { return dir_; }
  // The cluster's token file (also in this process's ORRERY_TOKEN_FILE).
  const std::string& token_file() const { return token_file_; }
  // Leaves dir() (the daemons' logs) in place when the cluster is destroyed.
  void KeepDirectory() { keep_dir_ = true; }
  const std::string& redis_address() const { return redis_address_; }
  // Redis's password file (mode 0600; also this process's ORRERY_REDIS_PASSWORD_FILE once
  // StartHead has started Redis).
  const std::string& redis_password_file() const { return redis_password_file_; }
  int redis_pid() const { return redis_pid_; }
  int head_pid() const { return head_pid_; }
  // The current pid of each node, in the order added; -1 for a node killed and not restarted.
  const std::vector<int>& node_pids() const { return node_pids_; }

 private:
  // AddNode with ORRERY_SYSROOT (unless `sysroot` is empty) and `env` set for the node only.
  int AddNodeWithEnv(const std::string& sysroot,
                     const std::vector<std::pair<std::string, std::string>>& env,
                     const std::string& labels, int cpus, const std::string& resources_json = "",
                     const std::vector<std::string>& extra_flags = {});

  void StartRedis(int port, const std::string& dir);

  std::string dir_;
  std::string token_file_;
  std::string redis_dir_;
  int redis_restarts_ = 0;
  std::string redis_address_;
  std::string redis_password_file_;
  std::string head_address_;
  double health_period_s_ = 0.2;
  int health_threshold_ = 3;
  int redis_pid_ = -1, head_pid_ = -1;
  std::vector<int> node_pids_;
  struct NodeSpec {
    std::vector<std::string> argv;
    std::vector<std::pair<std::string, std::string>> env;
  };
  std::vector<NodeSpec> node_specs_;   // parallel to node_pids_
  std::vector<std::string> node_ids_;  // every node started (hex), restarted ones too
  int logs_ = 0;                       // numbers the log files of restarted processes
  int heads_ = 0;                      // heads started: head.log, head.1.log, ...
  bool keep_dir_ = false;

  int StartNode(const NodeSpec& spec);

  class Spawner;
  std::unique_ptr<Spawner> spawner_;  // starts the daemons (see cluster_fixture.cc)
};

}  // namespace orrery_cluster
