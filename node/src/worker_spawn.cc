// How the node starts worker processes (node_service.h): the executable a request names is
// checked by its SHA-256 (fetched from the head when this host lacks it), then spawned
// through the zygote of that executable (docs/protocol.md "Executables", docs/security.md
// "What a node runs").
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/internal/clock.h"
#include "core/internal/file_hash.h"
#include "core/internal/log.h"
#include "core/internal/rate_limit.h"
#include "core/internal/runtime_env.h"
#include "node/internal/zygote.h"
#include "node/src/worker_pool.h"

namespace orrery::node {

using proto::MsgType;

namespace {

RateLimitedLog refused_log;

// A request this node will not run (an executable it cannot verify): logged, rate-limited,
// since any authenticated peer can send such requests at will.
// What keeps this node from starting a worker with `env`; empty when nothing does. A
// working_dir without a package must be a folder here; one with a package may be fetched.
std::string RuntimeEnvProblem(const proto::RuntimeEnvMsg& env) {
  if (Status s = runtime_env::Check(env); !s.ok()) return s.message();
  if (env.working_dir.empty() || !env.working_dir_hash.empty()) return "";
  std::string problem = runtime_env::FolderProblem(env.working_dir);
  return problem.empty() ? "" : "working_dir " + problem + " on this host";
}

void WarnRefused(const std::string& reason) {
  uint64_t suppressed = 0;
  if (refused_log.ShouldLog(&suppressed)) {
    LOG_WARN("node: refused to start a worker: " + reason + RateLimitedLog::More(suppressed));
  }
}
}  // namespace

WorkerPool::Worker& WorkerPool::NewWorker(bool is_actor, const std::vector<std::string>& argv,
                                          const std::string& hash, const std::string& arch,
                                          const Resources& demand,
                                          const proto::RuntimeEnvMsg& runtime_env) {
  std::string id = WorkerId::Random().Binary();
  Worker& w = workers_[id];
  w.id = id;
  w.is_actor = is_actor;
  w.started = MonotonicSeconds();
  w.wall_started = WallSeconds();
  w.executable = hash;
  w.runtime_env = runtime_env;
  if (std::string problem = RuntimeEnvProblem(runtime_env); !problem.empty()) {
    w.kill_requested = true;
    w.kill_reason = "node " + options_.node_hex.substr(0, 12) + " cannot give the " +
                    (is_actor ? "actor" : "task") + " its runtime env: " + problem;
    w.kill_kind = proto::ErrorKind::kCreationFailed;
    return w;
  }
  auto grant = devices_.Assign(demand, options_.node_hex.substr(0, 12));
  if (!grant.ok()) {
    w.kill_requested = true;
    w.kill_reason = grant.status().message();
    return w;
  }
  w.devices = grant.value().devices;
  w.device_env = grant.value().env;
  std::string local_arch = MachineArch();
  if (!arch.empty() && arch != local_arch) {
    w.kill_requested = true;
    w.kill_reason = "node " + options_.node_hex.substr(0, 12) + " runs on " + local_arch +
                    ", but the driver's executable is built for " + arch;
    return w;
  }
  if (!hash.empty() && !IsContentHash(hash)) {
    w.kill_requested = true;
    w.kill_reason = "the request's executable hash is not a SHA-256 (64 lowercase hex characters)";
    WarnRefused(w.kill_reason);
    return w;
  }
  if (!hash.empty()) w.argv = argv.empty() ? std::vector<std::string>{""} : argv;
  return Prepare(w);
}

WorkerPool::Worker& WorkerPool::Prepare(Worker& w) {
  // Its working folder: the runtime env's own, or this node's copy of its package.
  if (w.working_dir.empty() && !w.runtime_env.working_dir.empty()) {
    w.working_dir = executables_.WorkingFolder(w.runtime_env, w.id, node_address_);
    if (w.working_dir.empty()) return w;  // OnExecutable goes on
  }
  const std::string& hash = w.executable;
  if (hash.empty()) {
    // No executable named: only this node's own worker program (the embedded node's: the
    // driver itself). A path in a message never names what runs.
    if (options_.worker_argv.empty()) {
      w.kill_requested = true;
      w.kill_reason = "the request names no executable by SHA-256, and node " +
                      options_.node_hex.substr(0, 12) + " runs nothing else";
      WarnRefused(w.kill_reason);
      return w;
    }
    return SpawnOrTakeSpare(w, options_.worker_argv);
  }
  // The path is only where the executable may be found on this host; what runs is the
  // content the head vouched for, checked here by its SHA-256.
  if (executables_.Vouched(hash)) {
    std::string path = executables_.LocalExecutable(w.argv[0], hash);
    if (!path.empty()) {
      std::vector<std::string> resolved = w.argv;
      resolved[0] = path;
      return SpawnOrTakeSpare(w, resolved);
    }
  }
  executables_.Await(hash, w.argv[0], w.id, node_address_);
  return w;
}

void WorkerPool::OnExecutable(const std::string& worker_id, const std::string& hash, bool package,
                              const std::string& error) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  Worker& w = it->second;
  if (!error.empty()) {
    FailWorker(w, package ? "node " + options_.node_hex.substr(0, 12) +
                                " cannot give it its runtime env's working_dir: " + error
                          : "the driver's executable is not on this node and could not be "
                            "fetched: " +
                                error);
    return;
  }
  if (w.kill_requested) {
    FailWorker(w, w.kill_reason);
    return;
  }
  // What runs is a file whose SHA-256 is the vouched hash: the request's path or the cache.
  if (!package && executables_.LocalExecutable(w.argv[0], hash).empty()) {
    WarnRefused("no file on this node has the SHA-256 " + hash);
    FailWorker(w, "no file on this node has the SHA-256 " + hash + " of the driver's executable");
    return;
  }
  Worker& prepared = Prepare(w);
  if (prepared.kill_requested) {
    FailWorker(prepared, prepared.kill_reason);
  } else {
    Assign(prepared);
  }
}

WorkerPool::Worker& WorkerPool::SpawnOrTakeSpare(Worker& w, const std::vector<std::string>& argv) {
  // Only a worker that sees no devices (a fraction of one shows it) and has no runtime env
  // is prestarted.
  if (options_.prestarted <= 0 || !w.devices.empty() || w.device_env != no_device_env_ ||
      !w.runtime_env.empty()) {
    Spawn(w, argv);
    return w;
  }
  SpareKey key{w.executable, argv};
  SpareDemand& demand = spare_demand_[key];
  demand.last = MonotonicSeconds();
  demand.asked.push_back(demand.last);
  while (!demand.asked.empty() && (demand.last - demand.asked.front() > kDemandWindowS ||
                                   int(demand.asked.size()) > options_.prestarted))
    demand.asked.pop_front();
  demand.target = std::max(demand.target, int(demand.asked.size()));
  if (spare_demand_.size() > kMaxSpareExecutables) {
    auto oldest = spare_demand_.begin();
    for (auto it = spare_demand_.begin(); it != spare_demand_.end(); ++it)
      if (it->second.last < oldest->second.last) oldest = it;
    spare_demand_.erase(oldest);  // Replenish kills its spares
  }
  // A registered spare first: it takes its assignment at once.
  Worker* spare = nullptr;
  for (auto& [id, s] : workers_) {
    if (!s.spare || s.kill_requested || s.executable != key.first || s.argv != key.second) continue;
    if (!spare || (spare->address.empty() && !s.address.empty())) spare = &s;
  }
  if (!spare) {
    Spawn(w, argv);
    return w;
  }
  Worker& s = *spare;
  s.spare = false;
  s.is_actor = w.is_actor;
  s.actor = w.actor;
  s.has_lease = w.has_lease;
  s.lease = w.lease;
  s.started = MonotonicSeconds();
  std::string unused = w.id;
  Erase(unused);
  return s;
}

void WorkerPool::Replenish(double now) {
  for (auto it = spare_demand_.begin(); it != spare_demand_.end();) {
    it = now - it->second.last > kSpareKeepS ? spare_demand_.erase(it) : std::next(it);
  }
  std::map<SpareKey, int> have;
  for (auto& [id, w] : workers_) {
    if (!w.spare || w.kill_requested) continue;
    SpareKey key{w.executable, w.argv};
    if (options_.prestarted > 0 && spare_demand_.count(key)) {
      ++have[key];
    } else {
      Kill(w, "a prestarted worker of an executable no longer asked for");
    }
  }
  for (auto it = spare_demand_.begin(); it != spare_demand_.end();) {
    bool refused = false;
    for (int n = have[it->first]; n < it->second.target && !refused; ++n)
      refused = !StartSpare(it->first, now);
    // A zygote that refuses is not asked again on every tick (each refusal is logged): the
    // executable's next demand starts its spares again.
    it = refused ? spare_demand_.erase(it) : std::next(it);
  }
}

bool WorkerPool::StartSpare(const SpareKey& key, double now) {
  std::string id = WorkerId::Random().Binary();
  Worker& w = workers_[id];
  w.id = id;
  w.spare = true;
  w.started = now;
  w.wall_started = WallSeconds();
  w.executable = key.first;
  w.argv = key.second;
  w.device_env = no_device_env_;
  Spawn(w, key.second);
  if (!w.kill_requested) return true;
  Erase(id);
  return false;
}

void WorkerPool::Spawn(Worker& w, const std::vector<std::string>& argv) {
  uint64_t req = next_spawn_++;
  by_spawn_[req] = w.id;
  // The runtime env's variables first: the runtime's own (ORRERY_*, refused in a runtime env)
  // and the devices' follow.
  std::map<std::string, std::string> env = w.runtime_env.env_vars;
  if (!w.working_dir.empty()) env[runtime_env::kWorkingDirVar] = w.working_dir;
  env["ORRERY_ROLE"] = "worker";
  env["ORRERY_WORKER_ID"] = WorkerId(UniqueId::FromBinary(w.id)).Hex();
  env["ORRERY_NODE_ADDRESS"] = node_address_;
  env["ORRERY_HEAD_ADDRESS"] = options_.head_address;
  env["ORRERY_NODE_ID"] = options_.node_hex;
  // What the worker names as its executable when it submits work itself.
  if (!w.executable.empty()) env["ORRERY_EXECUTABLE_HASH"] = w.executable;
  for (const auto& [k, v] : w.device_env) env[k] = v;
  // The worker writes its stdout and stderr to worker-<pid>.out/.err there (zygote.cc).
  env[kWorkerLogDirEnv] = options_.log_dir;
  Status s = processes_.Spawn(argv, req, env);
  if (!s.ok()) {
    by_spawn_.erase(req);
    LOG_ERROR("cannot start a worker: " + s.message());
    w.kill_requested = true;
    w.kill_reason = "the worker process could not be started: " + s.message();
  }
}

void WorkerPool::OnSpawned(uint64_t request, int pid) {
  auto it = by_spawn_.find(request);
  if (it == by_spawn_.end()) return;
  std::string id = it->second;
  by_spawn_.erase(it);
  auto w = workers_.find(id);
  if (w == workers_.end()) {
    if (pid > 0) processes_.Kill(pid);
    return;
  }
  if (pid <= 0) {
    std::string cause = "the worker process could not be forked";
    if (w->second.is_actor) ActorDied(w->second, proto::ErrorKind::kActorDiedError, cause);
    if (w->second.has_lease) LeaseFailed(w->second.lease, proto::ErrorKind::kError, cause);
    Erase(id);
    return;
  }
  if (w->second.pid == 0) {
    w->second.pid = pid;
    by_pid_[pid] = id;
    WatchLogs(w->second);
  }
  if (w->second.kill_requested) processes_.Kill(pid);
}

void WorkerPool::OnSpawnFailed(uint64_t request, const std::string& cause) {
  auto it = by_spawn_.find(request);
  if (it == by_spawn_.end()) return;
  std::string id = it->second;
  by_spawn_.erase(it);
  auto w = workers_.find(id);
  if (w == workers_.end()) return;
  if (w->second.pid > 0) processes_.Kill(w->second.pid);  // registered before the answer came
  FailWorker(w->second, "the worker process could not be started: " + cause);
}

}  // namespace orrery::node
