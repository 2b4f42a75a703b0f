#include "autoscaler/src/provider.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/internal/log.h"

extern char** environ;

namespace orrery::autoscaler {

namespace {

// Runs argv with `env` added to this process's environment, stdout/stderr to `log` (or
// inherited when empty), in its own process group. Returns the pid or -1. Everything the
// child needs is built before the fork: between fork and exec it only makes system calls.
int Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
          const std::string& log) {
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string var(*e);
    if (!env.count(var.substr(0, var.find('=')))) vars.push_back(std::move(var));
  }
  for (const auto& [k, v] : env) vars.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  sigset_t none;
  sigemptyset(&none);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM);  // the autoscaler's nodes and commands die with it
  if (getppid() != parent) _exit(127);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  if (!log.empty()) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
  }
  execve(args[0], args.data(), envp.data());
  _exit(127);
}

// Waits for `pid` up to `timeout_s`; its exit status, or -1 after killing its group.
int WaitFor(int pid, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string Tail(const std::string& path, size_t bytes) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return "";
  std::fseek(f, 0, SEEK_END);
  long size = std::ftell(f);
  std::fseek(f, std::max(0L, size - long(bytes)), SEEK_SET);
  std::string out(size_t(std::min<long>(size, long(bytes))), '\0');
  out.resize(std::fread(out.data(), 1, out.size(), f));
  std::fclose(f);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

class LocalProvider final : public Provider {
 public:
  LocalProvider(std::string head, std::string orrery, std::map<std::string, std::string> env,
                std::vector<std::string> node_args)
      : head_(std::move(head)),
        orrery_(std::move(orrery)),
        env_(std::move(env)),
        node_args_(std::move(node_args)) {}
  ~LocalProvider() override { Shutdown(); }

  Status Create(const Unit& u) override {
    const GroupConfig& g = *u.group;
    Resources custom = g.resources;
    custom.erase("CPU");
    custom.erase("TPU");  // a TPU host's chips are detected
    custom.erase("memory");
    for (size_t h = 0; h < u.names.size(); ++h) {
      std::vector<std::string> argv = {orrery_, "node", "--address", head_};
      if (g.resources.count("CPU"))
        argv.insert(argv.end(), {"--num-cpus", std::to_string(int(g.resources.at("CPU")))});
      if (g.resources.count("memory"))
        argv.insert(argv.end(), {"--memory", std::to_string(int64_t(g.resources.at("memory")))});
      if (!custom.empty()) argv.insert(argv.end(), {"--resources", nlohmann::json(custom).dump()});
      std::string labels =
          std::string(kGroupLabel) + "=" + g.name + "," + kNodeLabel + "=" + u.names[h];
      for (const auto& [k, v] : g.labels) labels += "," + k + "=" + v;
      argv.insert(argv.end(), {"--labels", labels});
      argv.insert(argv.end(), node_args_.begin(), node_args_.end());
      std::map<std::string, std::string> env = env_;
      for (auto& [k, v] : UnitEnv(u, h, head_)) env[k] = v;
      int pid = Spawn(argv, env, "");
      if (pid < 0)
        return Status::Internal("cannot start orrery node: " + std::string(strerror(errno)));
      pids_[u.names[h]] = pid;
    }
    return Status::Ok();
  }

  Status Remove(const Unit& u) override {
    for (const auto& name : u.names) {
      auto it = pids_.find(name);
      if (it == pids_.end()) continue;
      kill(it->second, SIGTERM);
      if (WaitFor(it->second, 10) < 0) LOG_WARN("node " + name + " did not stop in 10 s: killed");
      pids_.erase(it);
    }
    return Status::Ok();
  }

  std::vector<std::string> Reap() override {
    std::vector<std::string> gone;
    for (auto it = pids_.begin(); it != pids_.end();) {
      int status = 0;
      if (waitpid(it->second, &status, WNOHANG) == it->second) {
        gone.push_back(it->first);
        it = pids_.erase(it);
      } else {
        ++it;
      }
    }
    return gone;
  }

  void Shutdown() override {
    for (const auto& [name, pid] : pids_) kill(pid, SIGTERM);
    for (const auto& [name, pid] : pids_) WaitFor(pid, 10);
    pids_.clear();
  }

 private:
  std::string head_, orrery_;
  std::map<std::string, std::string> env_;
  std::vector<std::string> node_args_;
  std::map<std::string, int> pids_;  // node name -> its `orrery node` process
};

class CommandProvider final : public Provider {
 public:
  CommandProvider(ProviderConfig config, std::string head, std::map<std::string, std::string> env)
      : config_(std::move(config)), head_(std::move(head)), env_(std::move(env)) {}

  Status Create(const Unit& u) override { return Run(config_.create, "create", u); }
  Status Remove(const Unit& u) override { return Run(config_.remove, "delete", u); }

 private:
  Status Run(const std::string& command, const char* what, const Unit& u) {
    std::map<std::string, std::string> env = env_;
    for (auto& [k, v] : UnitEnv(u, 0, head_)) env[k] = v;
    env.erase("TPU_WORKER_ID");  // per host; the command makes the whole slice
    std::string log = "/tmp/orrery-autoscaler-" + std::to_string(getpid()) + ".out";
    ::unlink(log.c_str());
    int pid = Spawn({"/bin/sh", "-c", command}, env, log);
    if (pid < 0) return Status::Internal(std::string("cannot run the ") + what + " command");
    int rc = WaitFor(pid, config_.timeout_s);
    std::string out = Tail(log, 400);
    ::unlink(log.c_str());
    if (rc == 0) return Status::Ok();
    return Status::Unavailable(
        std::string("the ") + what + " command " +
        (rc < 0 ? "ran over its " + std::to_string(int(config_.timeout_s)) + " s and was killed"
                : "exited with " + std::to_string(rc)) +
        (out.empty() ? "" : ": " + out));
  }

  ProviderConfig config_;
  std::string head_;
  std::map<std::string, std::string> env_;
};

}  // namespace

std::map<std::string, std::string> UnitEnv(const Unit& u, size_t host, const std::string& head) {
  std::map<std::string, std::string> env = {
      {"ORRERY_GROUP", u.group->name},
      {"ORRERY_GROUP_SIZE", std::to_string(u.group_size)},
      {"ORRERY_NODE_NAME", host < u.names.size() ? u.names[host] : ""},
      {"ORRERY_HEAD_ADDRESS", head}};
  if (u.group->is_tpu) {
    std::string hosts;
    for (const auto& n : u.names) hosts += (hosts.empty() ? "" : ",") + n;
    env["ORRERY_SLICE_NAME"] = u.slice;
    env["ORRERY_SLICE_HOSTS"] = std::to_string(u.names.size());
    env["TPU_NAME"] = u.slice;
    env["TPU_WORKER_ID"] = std::to_string(host);
    env["TPU_WORKER_HOSTNAMES"] = hosts;
    env["TPU_ACCELERATOR_TYPE"] = u.group->tpu.pod_type;
    env["TPU_TOPOLOGY"] = u.group->tpu.topology;
  }
  return env;
}

std::unique_ptr<Provider> MakeProvider(const ProviderConfig& config, const std::string& head,
                                       const std::string& orrery_path,
                                       std::map<std::string, std::string> env,
                                       std::vector<std::string> node_args) {
  if (config.type == "command")
    return std::make_unique<CommandProvider>(config, head, std::move(env));
  return std::make_unique<LocalProvider>(head, orrery_path, std::move(env), std::move(node_args));
}

}  // namespace orrery::autoscaler
