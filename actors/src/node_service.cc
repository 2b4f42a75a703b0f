#include "actors/src/node_service.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/src/clock.h"
#include "core/src/file_hash.h"
#include "core/src/log.h"
#include "core/src/rate_limit.h"
#include "core/src/security.h"
#include "orrery/resources.h"
#include "orrery/tpu.h"

namespace orrery::runtime {

using proto::MsgType;

namespace {
double Now() { return MonotonicSeconds(); }

// A worker killed for memory that has not exited after this long no longer holds back the
// next kill.
constexpr double kOomVictimGraceS = 10;

// Paths whose content hash is remembered (argv[0] of requests and cached copies).
constexpr size_t kMaxHashedPaths = 256;

RateLimitedLog stray_reply_log;
RateLimitedLog refused_log;

// A request this node will not run (an executable it cannot verify): logged, rate-limited,
// since any authenticated peer can send such requests at will.
void WarnRefused(const std::string& reason) {
  uint64_t suppressed = 0;
  if (refused_log.ShouldLog(&suppressed)) {
    LOG_WARN("node: refused to start a worker: " + reason + RateLimitedLog::More(suppressed));
  }
}

uint64_t RandomNonce() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ uint64_t(rd());
}

std::string SysrootOf(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("ORRERY_SYSROOT");
  return env ? env : "";
}
}  // namespace

NodeService::NodeService(NodeOptions options)
    : options_(std::move(options)),
      id_(NodeId::Random()),
      secret_(security::NewToken()),
      memory_(std::make_unique<SystemMemoryReader>(SysrootOf(options_.sysroot)),
              options_.memory_usage_threshold) {
  for (const char* kind : {"TPU", "GPU", "XPU"}) {
    auto it = options_.resources.find(kind);
    if (it == options_.resources.end() || it->second < 1) continue;
    auto ids = options_.accelerator_ids.find(kind);
    if (ids != options_.accelerator_ids.end() && !ids->second.empty()) {
      free_devices_[kind] = ids->second;
    } else {
      for (int i = 0; i < int(it->second); ++i) free_devices_[kind].push_back(i);
    }
  }
  if (options_.binary_cache_dir.empty()) {
    const char* t = std::getenv("ORRERY_TMPDIR");
    options_.binary_cache_dir = std::string(t && *t ? t : "/tmp/orrery") + "/node_binaries";
  }
  options_.labels["orrery.io/node-id"] = id_.Hex();
  ZygoteEvents events;
  events.spawned = [this](uint64_t req, int pid) { OnSpawned(req, pid); };
  events.exited = [this](int pid, const std::string& how) { OnExited(pid, how); };
  events.failed = [this](uint64_t req, const std::string& cause) { OnSpawnFailed(req, cause); };
  zygotes_ = std::make_unique<ZygotePool>(options_.worker_env, std::move(events));
}

NodeService::~NodeService() { Stop(); }

Status NodeService::Start(int register_timeout_ms) {
  Status s = inbox_.Bind(options_.bind_host, 0, options_.advertise_host);
  if (!s.ok()) return s;
  // The tick is the heartbeat's, or the memory monitor's when that is shorter.
  int tick_ms = int(options_.heartbeat_period_s * 1000);
  if (options_.memory_monitor_refresh_ms > 0)
    tick_ms = std::min(tick_ms, options_.memory_monitor_refresh_ms);
  (void)memory_.Refresh();  // the registration carries a first reading
  inbox_.SetTick(std::max(tick_ms, 1), [this] { Tick(); });
  inbox_.AddFd(zygotes_->fd(), [this] { zygotes_->OnReady(); });
  inbox_.Start([this](transport::Envelope& env) { Handle(env); }, "orrery-node");
  if (!options_.worker_argv.empty()) {
    // Start the default zygote now, so the first actor does not wait for it.
    Mutex mu;  // guards done and st (locals: not annotated)
    CondVar cv;
    bool done = false;
    Status st;
    inbox_.Post([&] {
      Status z = zygotes_->Prepare(options_.worker_argv);
      MutexLock lock(&mu);
      st = z;
      done = true;
      cv.NotifyAll();
    });
    MutexLock lock(&mu);
    while (!done) cv.Wait(&mu);
    if (!st.ok()) return st;
  }
  inbox_.Post([this] { SendRegistration(true); });
  {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(register_timeout_ms);
    MutexLock lock(&mu_);
    while (!registered_ && cv_.WaitUntil(&mu_, deadline)) {
    }
    if (!registered_) {
      return Status::Unavailable("the head at " + options_.head_address +
                                 " did not answer the node's registration");
    }
  }
  LOG_INFO("node " + id_.Hex() + " up at " + inbox_.address() + " with " +
           ToString(options_.resources));
  return Status::Ok();
}

void NodeService::SendRegistration(bool alive) {
  proto::RegisterNodeMsg reg;
  reg.node = {id_.Binary(),       inbox_.address(),   alive,
              options_.resources, options_.resources, options_.labels};
  if (alive) {  // on the inbox thread, which owns the monitor (Stop's goodbye is not)
    reg.node.memory_used_bytes = memory_.last().used_bytes;
    reg.node.memory_total_bytes = memory_.last().total_bytes;
    reg.node.memory_usage_threshold = memory_.threshold();
  }
  reg.reply_to = inbox_.address();
  reg.node_secret = secret_;
  transport::Send(options_.head_address, MsgType::kRegisterNode, reg);
}

void NodeService::Stop() {
  bool was_running = false;
  {
    MutexLock lock(&mu_);
    was_running = registered_;
    registered_ = false;
  }
  if (was_running) SendRegistration(false);  // from this thread: the inbox is stopping
  inbox_.Stop();
  zygotes_->StopAll();  // workers die with their zygote
  for (auto& [id, w] : workers_)
    if (w.pid > 0) kill(w.pid, SIGKILL);
  workers_.clear();
}

void NodeService::Handle(transport::Envelope& env) {
  auto decode = [&](auto* m) {
    Status s = env.Decode(m);
    if (!s.ok()) throw std::runtime_error(s.message());
  };
  switch (env.type) {
    case MsgType::kAck: {
      MutexLock lock(&mu_);
      registered_ = true;
      cv_.NotifyAll();
      return;
    }
    case MsgType::kStartActor: {
      proto::StartActorMsg m;
      decode(&m);
      return OnStartActor(m);
    }
    case MsgType::kGrantLease: {
      proto::GrantLeaseMsg m;
      decode(&m);
      return OnGrantLease(m.request);
    }
    case MsgType::kReleaseLease: {
      proto::ReleaseLeaseMsg m;
      decode(&m);
      return OnReleaseLease(m.lease_id);
    }
    case MsgType::kKillWorker: {
      proto::KillWorkerMsg m;
      decode(&m);
      return OnKillWorker(m);
    }
    case MsgType::kWorkerRegister: {
      proto::WorkerRegisterMsg m;
      decode(&m);
      return OnWorkerRegister(m);
    }
    case MsgType::kAssignReply: {
      proto::AssignReplyMsg m;
      decode(&m);
      return OnAssignReply(m);
    }
    case MsgType::kPing: {
      proto::PingMsg m;
      decode(&m);
      if (!m.reply_to.empty()) transport::Send(m.reply_to, MsgType::kPong, m);
      return;
    }
    case MsgType::kBinaryReply: {
      proto::BinaryMsg m;
      decode(&m);
      return OnBinaryReply(m, env.PayloadString());
    }
    case MsgType::kError: {
      proto::ErrorMsg m;
      (void)env.Decode(&m);
      LOG_WARN("node: a peer rejected a message: " + m.message);
      return;
    }
    default:
      throw std::runtime_error(std::string("the node does not handle ") +
                               proto::TypeName(env.type));
  }
}

NodeService::Worker& NodeService::NewWorker(bool is_actor, const std::vector<std::string>& argv,
                                            const std::string& hash, const std::string& arch,
                                            const Resources& demand) {
  std::string id = WorkerId::Random().Binary();
  Worker& w = workers_[id];
  w.id = id;
  w.is_actor = is_actor;
  w.started = Now();
  w.executable = hash;
  auto env = AssignDevices(w, demand);
  if (!env.ok()) {
    w.kill_requested = true;
    w.kill_reason = env.status().message();
    return w;
  }
  w.device_env = env.value();
  std::string local_arch = MachineArch();
  if (!arch.empty() && arch != local_arch) {
    w.kill_requested = true;
    w.kill_reason = "node " + id_.Hex().substr(0, 12) + " runs on " + local_arch +
                    ", but the driver's executable is built for " + arch;
    return w;
  }
  if (hash.empty()) {
    // No executable named: only this node's own worker program (the embedded node's: the
    // driver itself). A path in a message never names what runs.
    if (options_.worker_argv.empty()) {
      w.kill_requested = true;
      w.kill_reason = "the request names no executable by SHA-256, and node " +
                      id_.Hex().substr(0, 12) + " runs nothing else";
      WarnRefused(w.kill_reason);
      return w;
    }
    Spawn(w, options_.worker_argv);
    return w;
  }
  if (!IsContentHash(hash)) {
    w.kill_requested = true;
    w.kill_reason = "the request's executable hash is not a SHA-256 (64 lowercase hex characters)";
    WarnRefused(w.kill_reason);
    return w;
  }
  // The path is only where the executable may be found on this host; what runs is the
  // content the head vouched for, checked here by its SHA-256.
  w.argv = argv.empty() ? std::vector<std::string>{""} : argv;
  if (vouched_.count(hash)) {
    std::string path = LocalExecutable(w.argv[0], hash);
    if (!path.empty()) {
      std::vector<std::string> resolved = w.argv;
      resolved[0] = path;
      Spawn(w, resolved);
      return w;
    }
  }
  auto& waiting = awaiting_binary_[hash];
  if (waiting.empty()) {
    // Ask the head whether a job registered this executable, and for its content when this
    // node has no copy. The nonce makes the head's the only reply that counts.
    bool have = !LocalExecutable(w.argv[0], hash).empty();
    uint64_t nonce = RandomNonce();
    fetch_nonce_[hash] = nonce;
    if (!have) LOG_INFO("node: fetching the driver's executable " + hash + " from the head");
    proto::BinaryMsg ask{nonce, inbox_.address(), hash, "", true, ""};
    ask.want_bytes = !have;
    transport::Send(options_.head_address, MsgType::kFetchBinary, ask);
  }
  waiting.push_back(id);
  return w;
}

bool NodeService::HasContent(const std::string& path, const std::string& hash) {
  Result<ExecutableIdentity> file = IdentityOf(path);
  if (!file.ok()) return false;
  if (hash_cache_.size() >= kMaxHashedPaths && !hash_cache_.count(path)) hash_cache_.clear();
  auto& cached = hash_cache_[path];
  if (cached.first != file.value() || cached.second.empty())
    cached = {file.value(), HashFile(path)};
  return cached.second == hash;
}

std::string NodeService::LocalExecutable(const std::string& path, const std::string& hash) {
  if (!path.empty() && HasContent(path, hash)) return path;
  std::string cached_path = options_.binary_cache_dir + "/" + hash;
  if (access(cached_path.c_str(), X_OK) == 0 && HasContent(cached_path, hash)) return cached_path;
  return "";
}

void NodeService::OnBinaryReply(const proto::BinaryMsg& m, const std::string& bytes) {
  auto nonce = fetch_nonce_.find(m.hash);
  if (nonce == fetch_nonce_.end() || nonce->second != m.request_id) {
    uint64_t suppressed = 0;
    if (stray_reply_log.ShouldLog(&suppressed)) {
      LOG_WARN("node: dropped an executable reply that answers no request of this node" +
               RateLimitedLog::More(suppressed));
    }
    return;
  }
  fetch_nonce_.erase(nonce);
  auto waiting = std::move(awaiting_binary_[m.hash]);
  awaiting_binary_.erase(m.hash);
  std::string error;
  std::string path = options_.binary_cache_dir + "/" + m.hash;
  if (!m.ok) {
    error = "the head does not vouch for it: " + m.message;
  } else if (bytes.empty()) {
    vouched_.insert(m.hash);  // this node has a copy (checked again below)
  } else if (HashBytes(bytes) != m.hash) {
    error = "the executable fetched from the head does not match its SHA-256 " + m.hash;
  } else {
    vouched_.insert(m.hash);
    std::error_code ec;
    std::filesystem::create_directories(options_.binary_cache_dir, ec);
    chmod(options_.binary_cache_dir.c_str(), 0700);
    std::string tmp = path + ".tmp" + std::to_string(getpid());
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(bytes.data(), std::streamsize(bytes.size()));
      if (!out) error = "cannot write " + tmp;
    }
    if (error.empty()) {
      chmod(tmp.c_str(), 0755);
      std::filesystem::rename(tmp, path, ec);
      if (ec) error = "cannot store " + path + ": " + ec.message();
    }
  }
  if (error.empty() && !bytes.empty()) LOG_INFO("node: cached the driver's executable as " + path);
  if (!error.empty()) WarnRefused("executable " + m.hash + ": " + error);
  for (const auto& id : waiting) {
    auto it = workers_.find(id);
    if (it == workers_.end()) continue;
    Worker& w = it->second;
    if (!error.empty()) {
      FailWorker(w,
                 "the driver's executable is not on this node and could not be fetched: " + error);
      continue;
    }
    if (w.kill_requested) {
      FailWorker(w, w.kill_reason);
      continue;
    }
    // What runs is a file whose SHA-256 is the vouched hash: the request's path or the cache.
    std::string local = LocalExecutable(w.argv[0], m.hash);
    if (local.empty()) {
      WarnRefused("no file on this node has the SHA-256 " + m.hash);
      FailWorker(w,
                 "no file on this node has the SHA-256 " + m.hash + " of the driver's executable");
      continue;
    }
    std::vector<std::string> argv = w.argv;
    argv[0] = local;
    Spawn(w, argv);
  }
}

void NodeService::FailWorker(Worker& w, const std::string& reason) {
  if (w.is_actor) ActorDied(w, "ActorDiedError", reason);
  if (w.has_lease) LeaseFailed(w.lease, "Error", reason);
  Erase(w.id);
}

void NodeService::Spawn(Worker& w, const std::vector<std::string>& argv) {
  uint64_t req = next_spawn_++;
  by_spawn_[req] = w.id;
  std::map<std::string, std::string> env;
  env["ORRERY_ROLE"] = "worker";
  env["ORRERY_WORKER_ID"] = WorkerId(UniqueId::FromBinary(w.id)).Hex();
  env["ORRERY_NODE_ADDRESS"] = inbox_.address();
  env["ORRERY_HEAD_ADDRESS"] = options_.head_address;
  env["ORRERY_NODE_ID"] = id_.Hex();
  // What the worker names as its executable when it submits work itself.
  if (!w.executable.empty()) env["ORRERY_EXECUTABLE_HASH"] = w.executable;
  for (const auto& [k, v] : w.device_env) env[k] = v;
  Status s = zygotes_->Spawn(argv, req, env);
  if (!s.ok()) {
    by_spawn_.erase(req);
    LOG_ERROR("cannot start a worker: " + s.message());
    w.kill_requested = true;
    w.kill_reason = "the worker process could not be started: " + s.message();
  }
}

Result<std::map<std::string, std::string>> NodeService::AssignDevices(Worker& w,
                                                                      const Resources& demand) {
  std::map<std::string, std::string> env;
  nlohmann::json ids_json = nlohmann::json::object();
  for (const char* kind : {"TPU", "GPU", "XPU"}) {
    auto it = demand.find(kind);
    if (it == demand.end() || it->second <= 0) continue;
    auto& free = free_devices_[kind];
    int total = int(options_.resources.count(kind) ? options_.resources.at(kind) : 0);
    std::vector<int> ids;
    if (it->second < 1) {
      // A fraction shares one device with other fractional holders: not exclusive.
      auto all = options_.accelerator_ids.count(kind) ? options_.accelerator_ids.at(kind)
                                                      : std::vector<int>{0};
      ids.push_back(free.empty() ? all.front() : free.front());
    } else {
      int n = int(it->second);
      if (std::string(kind) == "TPU") {
        Status s = tpu::ValidateChipsPerProcess(n, total);
        if (!s.ok())
          return Status::InvalidArgument("a worker cannot take " + std::to_string(n) +
                                         " TPU chips: " + s.message());
      }
      if (int(free.size()) < n) {
        return Status::Unavailable("node " + id_.Hex().substr(0, 12) + " has " +
                                   std::to_string(free.size()) + " free " + kind +
                                   " device(s), the worker needs " + std::to_string(n));
      }
      ids.assign(free.begin(), free.begin() + n);
      free.erase(free.begin(), free.begin() + n);
      w.devices[kind] = ids;
    }
    std::string list;
    for (int i : ids) list += (list.empty() ? "" : ",") + std::to_string(i);
    if (std::string(kind) == "TPU") {
      for (const auto& [k, v] : tpu::VisibleChipsEnv(ids, total)) env[k] = v;
    } else if (std::string(kind) == "GPU") {
      env["CUDA_VISIBLE_DEVICES"] = list;
    } else {
      env["ZE_AFFINITY_MASK"] = list;
    }
    ids_json[kind] = ids;
  }
  env["ORRERY_ACCELERATOR_IDS"] = ids_json.dump();
  return env;
}

void NodeService::ReleaseDevices(Worker& w) {
  for (auto& [kind, ids] : w.devices) {
    auto& free = free_devices_[kind];
    free.insert(free.end(), ids.begin(), ids.end());
    std::sort(free.begin(), free.end());
  }
  w.devices.clear();
}

void NodeService::Erase(const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  auto pid = by_pid_.find(it->second.pid);
  if (pid != by_pid_.end() && pid->second == worker_id) by_pid_.erase(pid);
  ReleaseDevices(it->second);
  workers_.erase(it);
}

void NodeService::OnStartActor(const proto::StartActorMsg& m) {
  Worker& w =
      NewWorker(true, m.spec.argv, m.spec.binary_hash, m.spec.arch, m.spec.options.resources);
  w.actor = m;
  if (w.kill_requested) FailWorker(w, w.kill_reason);
}

void NodeService::OnGrantLease(const proto::LeaseRequestMsg& r) {
  bool wants_devices = false;
  for (const char* kind : {"TPU", "GPU", "XPU"})
    wants_devices = wants_devices || r.resources.count(kind);
  const std::string& executable = r.binary_hash;
  for (auto& [id, w] : workers_) {
    // An idle task worker serves another lease only for the same executable and when
    // neither needs devices (a process's visible devices are fixed when it starts).
    if (!w.is_actor && w.ready && !w.has_lease && !w.kill_requested && !wants_devices &&
        w.devices.empty() && w.executable == executable) {
      w.has_lease = true;
      w.lease = r;
      w.started = Now();
      GrantTo(w);
      return;
    }
  }
  Worker& w = NewWorker(false, r.argv, r.binary_hash, r.arch, r.resources);
  w.has_lease = true;
  w.lease = r;
  if (w.kill_requested) FailWorker(w, w.kill_reason);
}

void NodeService::GrantTo(Worker& w) {
  proto::LeaseReplyMsg reply;
  reply.request_id = w.lease.request_id;
  reply.lease_id = w.lease.lease_id;
  reply.ok = true;
  reply.worker_address = w.call_address;
  reply.worker_id = w.id;
  reply.node_id = id_.Binary();
  transport::Send(w.lease.reply_to, MsgType::kLeaseReply, reply);
}

void NodeService::LeaseFailed(const proto::LeaseRequestMsg& r, const std::string& kind,
                              const std::string& message) {
  proto::LeaseReplyMsg reply;
  reply.request_id = r.request_id;
  reply.lease_id = r.lease_id;
  reply.ok = false;
  reply.error_kind = kind;
  reply.message = message;
  transport::Send(r.reply_to, MsgType::kLeaseReply, reply);
  proto::WorkerEventMsg ev;
  ev.kind = int(proto::WorkerEventKind::kLeaseWorkerDied);
  ev.node_id = id_.Binary();
  ev.node_secret = secret_;
  ev.lease_id = r.lease_id;
  ev.cause = message;
  transport::Send(options_.head_address, MsgType::kWorkerEvent, ev);
}

void NodeService::OnReleaseLease(const std::string& lease_id) {
  if (Worker* w = ByLease(lease_id)) {
    w->has_lease = false;
    w->idle_since = Now();
    if (!w->devices.empty()) Kill(*w, "its lease ended; its devices go back to the node");
  }
}

void NodeService::Kill(Worker& w, const std::string& reason) {
  if (!w.kill_requested) {
    w.kill_requested = true;
    w.kill_reason = reason;
  }
  if (w.pid > 0) kill(w.pid, SIGKILL);
}

void NodeService::OnKillWorker(const proto::KillWorkerMsg& m) {
  Worker* w = !m.actor_id.empty() ? ByActor(m.actor_id) : ByLease(m.lease_id);
  if (w) Kill(*w, m.reason);
}

void NodeService::OnWorkerRegister(const proto::WorkerRegisterMsg& m) {
  auto it = workers_.find(UniqueId::FromHex(m.worker_id).Binary());
  if (it == workers_.end()) {
    LOG_WARN("node: unknown worker " + m.worker_id + " registered; telling it to exit");
    transport::Send(m.address, MsgType::kExit, proto::PingMsg{});
    return;
  }
  Worker& w = it->second;
  w.address = m.address;
  w.call_address = m.call_address.empty() ? m.address : m.call_address;
  if (w.pid == 0) {
    w.pid = m.pid;
    by_pid_[m.pid] = w.id;
  }
  if (w.kill_requested) {
    Kill(w, w.kill_reason);
    return;
  }
  proto::AssignMsg a;
  a.worker_id = m.worker_id;
  a.is_actor = w.is_actor;
  if (w.is_actor) a.actor = w.actor;
  a.node_id = id_.Binary();
  a.head_address = options_.head_address;
  transport::Send(w.address, MsgType::kAssign, a);
}

void NodeService::OnAssignReply(const proto::AssignReplyMsg& m) {
  auto it = workers_.find(UniqueId::FromHex(m.worker_id).Binary());
  if (it == workers_.end()) return;
  Worker& w = it->second;
  if (!m.ok) {
    std::string cause =
        "the creation of the actor failed: " + (m.error_type.empty() ? "" : m.error_type + ": ") +
        m.message;
    if (w.is_actor) {
      ActorDied(w, "CreationFailed", cause);
    } else if (w.has_lease) {
      LeaseFailed(w.lease, "Error", cause);
      w.has_lease = false;
    }
    Kill(w, cause);
    return;
  }
  w.ready = true;
  if (w.is_actor) {
    proto::WorkerEventMsg ev;
    ev.kind = int(proto::WorkerEventKind::kActorAlive);
    ev.node_id = id_.Binary();
    ev.node_secret = secret_;
    ev.node_secret = secret_;
    ev.actor_id = w.actor.spec.actor_id;
    ev.incarnation = w.actor.incarnation;
    ev.address = w.call_address;
    ev.pid = w.pid;
    transport::Send(options_.head_address, MsgType::kWorkerEvent, ev);
  } else if (w.has_lease) {
    GrantTo(w);
  } else {
    w.idle_since = Now();
  }
}

void NodeService::ActorDied(Worker& w, const std::string& kind, const std::string& cause) {
  if (w.reported || !w.is_actor) return;
  w.reported = true;
  proto::WorkerEventMsg ev;
  ev.kind = int(proto::WorkerEventKind::kActorDied);
  ev.node_id = id_.Binary();
  ev.node_secret = secret_;
  ev.actor_id = w.actor.spec.actor_id;
  ev.incarnation = w.actor.incarnation;
  ev.pid = w.pid;
  ev.error_kind = kind;
  ev.cause = cause;
  transport::Send(options_.head_address, MsgType::kWorkerEvent, ev);
}

void NodeService::OnSpawned(uint64_t request, int pid) {
  auto it = by_spawn_.find(request);
  if (it == by_spawn_.end()) return;
  std::string id = it->second;
  by_spawn_.erase(it);
  auto w = workers_.find(id);
  if (w == workers_.end()) {
    if (pid > 0) kill(pid, SIGKILL);
    return;
  }
  if (pid <= 0) {
    std::string cause = "the worker process could not be forked";
    if (w->second.is_actor) ActorDied(w->second, "ActorDiedError", cause);
    if (w->second.has_lease) LeaseFailed(w->second.lease, "Error", cause);
    Erase(id);
    return;
  }
  if (w->second.pid == 0) {
    w->second.pid = pid;
    by_pid_[pid] = id;
  }
  if (w->second.kill_requested) kill(pid, SIGKILL);
}

void NodeService::OnSpawnFailed(uint64_t request, const std::string& cause) {
  auto it = by_spawn_.find(request);
  if (it == by_spawn_.end()) return;
  std::string id = it->second;
  by_spawn_.erase(it);
  auto w = workers_.find(id);
  if (w == workers_.end()) return;
  if (w->second.pid > 0) kill(w->second.pid, SIGKILL);  // registered before the answer came
  FailWorker(w->second, "the worker process could not be started: " + cause);
}

void NodeService::OnExited(int pid, const std::string& how) {
  auto it = by_pid_.find(pid);
  if (it == by_pid_.end()) return;
  std::string id = it->second;
  by_pid_.erase(it);
  auto wit = workers_.find(id);
  if (wit == workers_.end()) return;
  Worker& w = wit->second;
  std::string cause = w.kill_requested
                          ? w.kill_reason
                          : "its worker process (pid " + std::to_string(pid) + ") " + how;
  if (w.is_actor) ActorDied(w, w.kill_kind.empty() ? "ActorDiedError" : w.kill_kind, cause);
  if (w.has_lease) LeaseFailed(w.lease, w.kill_kind.empty() ? "WorkerDied" : w.kill_kind, cause);
  Erase(id);
}

void NodeService::Tick() {
  CheckMemory();
  // The tick may be the memory monitor's, shorter than the heartbeat's period: send the
  // heartbeat on the tick nearest to its period, never later.
  double now = Now(), hb = options_.heartbeat_period_s;
  double tick = options_.memory_monitor_refresh_ms > 0
                    ? std::min(hb, options_.memory_monitor_refresh_ms / 1000.0)
                    : hb;
  if (now - last_heartbeat_ < hb - tick / 2) return;
  last_heartbeat_ = now;
  SendRegistration(true);  // the heartbeat
  // Idle task workers beyond the kept pool go after a while.
  int idle = 0;
  for (auto& [id, w] : workers_) {
    if (w.is_actor || !w.ready || w.has_lease || w.kill_requested) continue;
    if (++idle > options_.idle_workers_kept &&
        now - w.idle_since > options_.idle_worker_timeout_s) {
      Kill(w, "idle");
    }
  }
}

void NodeService::CheckMemory() {
  if (!memory_.Refresh() || options_.memory_monitor_refresh_ms <= 0) return;
  double now = Now();
  // One kill at a time: the victim's memory is back only once its process is gone.
  if (!oom_victim_.empty() && workers_.count(oom_victim_) &&
      now - oom_victim_since_ < kOomVictimGraceS)
    return;
  std::vector<OomCandidate> candidates;
  std::vector<Worker*> running;
  for (auto& [id, w] : workers_) {
    if (w.pid <= 0 || w.kill_requested || !(w.is_actor || w.has_lease)) continue;
    const auto& o = w.actor.spec.options;
    // An actor is restarted while restarts are left (its incarnation counts those used).
    bool retriable = w.is_actor ? o.max_restarts < 0 || w.actor.incarnation < o.max_restarts
                                : w.lease.max_retries != 0;
    candidates.push_back({id, retriable, w.started});
    running.push_back(&w);
  }
  int i = ChooseOomVictim(candidates);
  if (i < 0) return;
  Worker& w = *running[i];
  std::string victim = "the worker (pid " + std::to_string(w.pid) + ") " +
                       (w.is_actor ? "of actor " + UniqueId::FromBinary(w.actor.spec.actor_id).Hex()
                                   : "running a task");
  std::string message = OutOfMemoryMessage(id_.Hex(), memory_.last(), memory_.threshold(), victim);
  LOG_WARN(message);
  w.kill_kind = "OutOfMemoryError";
  oom_victim_ = w.id;
  oom_victim_since_ = now;
  Kill(w, message);
}

NodeService::Worker* NodeService::ByActor(const std::string& actor_id) {
  for (auto& [id, w] : workers_)
    if (w.is_actor && w.actor.spec.actor_id == actor_id) return &w;
  return nullptr;
}

NodeService::Worker* NodeService::ByLease(const std::string& lease_id) {
  for (auto& [id, w] : workers_)
    if (w.has_lease && w.lease.lease_id == lease_id) return &w;
  return nullptr;
}

}  // namespace orrery::runtime
