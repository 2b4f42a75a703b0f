// The node daemon's link to the head and its clock (node_service.h): registration and
// heartbeat, the inbox's dispatch, and the memory monitor's tick (docs/architecture.md
// "Node").
#include "node/internal/node_service.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/internal/clock.h"
#include "core/internal/kept_memory.h"
#include "core/internal/log.h"
#include "core/internal/rate_limit.h"
#include "core/internal/security.h"
#include "core/internal/session_dir.h"
#include "core/internal/transport.h"
#include "node/src/node_metrics.h"
#include "node/src/zygote_pool.h"
#include "orrery/resources.h"

namespace orrery::node {

namespace {
// Where a node keeps its files when told nothing else: $ORRERY_TMPDIR, else /tmp/orrery.
std::string TmpRoot() { return SessionRoot(); }
}  // namespace

using proto::MsgType;

namespace {
double Now() { return MonotonicSeconds(); }

// A worker killed for memory that has not exited after this long no longer holds back the
// next kill.
constexpr double kOomVictimGraceS = 10;

std::string SysrootOf(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("ORRERY_SYSROOT");
  return env ? env : "";
}
}  // namespace

NodeService::NodeService(NodeOptions options)
    : NodeService(std::move(options), TransportOutbox(),
                  [](std::map<std::string, std::string> env, ZygoteEvents events) {
                    return std::make_unique<ZygotePool>(std::move(env), std::move(events));
                  }) {}

NodeService::NodeService(NodeOptions options, Outbox& outbox,
                         const WorkerProcessesFactory& processes)
    : options_(std::move(options)),
      id_(NodeId::Random()),
      secret_(security::NewToken()),
      outbox_(outbox),
      head_(outbox_, options_.head_address, options_.on_refused),
      cache_(outbox_, options_.head_address,
             options_.binary_cache_dir.empty() ? TmpRoot() + "/node_binaries"
                                               : options_.binary_cache_dir),
      devices_(options_.resources, options_.accelerator_ids),
      memory_(std::make_unique<SystemMemoryReader>(SysrootOf(options_.sysroot)),
              options_.memory_usage_threshold) {
  options_.binary_cache_dir = cache_.dir();
  own_log_dir_ = options_.log_dir.empty();
  if (own_log_dir_) options_.log_dir = TmpRoot() + "/logs/node-" + id_.Hex().substr(0, 12);
  options_.labels["orrery.io/node-id"] = id_.Hex();
  // Workers allocate large values fresh (a task's vector argument, a result): with glibc's
  // transparent huge pages for its big allocations such a vector fills 2.5 times faster on
  // hosts whose THP mode is "madvise", and with one arena it lands in memory the worker kept
  // (kWorkerTunables; docs/objects.md "Speed"). Each setting of the user's wins.
  {
    auto given = options_.worker_env.find("GLIBC_TUNABLES");
    const char* user =
        given != options_.worker_env.end() ? given->second.c_str() : std::getenv("GLIBC_TUNABLES");
    std::string framework = internal::MergeTunables(user, internal::kHugePageTunables);
    options_.worker_env["GLIBC_TUNABLES"] = internal::WorkerTunables(user);
    options_.worker_env[internal::kFrameworkTunablesEnv] = framework;
  }
  ZygoteEvents events;
  events.spawned = [this](uint64_t req, int pid) { pool_->OnSpawned(req, pid); };
  events.exited = [this](int pid, const std::string& how) { pool_->OnExited(pid, how); };
  events.failed = [this](uint64_t req, const std::string& cause) {
    pool_->OnSpawnFailed(req, cause);
  };
  // Every job and worker in a cgroup of its own, where cgroup v2 can be written
  // (process_cgroup.h); the zygotes learn the subtree from their environment.
  cgroups_ = CgroupTree::Create();
  std::map<std::string, std::string> zygote_env = options_.worker_env;
  if (cgroups_) zygote_env["ORRERY_CGROUP_DIR"] = cgroups_->path();
  zygote_env[kWorkerLogDirEnv] = options_.log_dir;
  zygotes_ = processes(std::move(zygote_env), std::move(events));
  pool_ = std::make_unique<WorkerPool>(
      WorkerPoolOptions{options_.head_address, id_.Binary(), id_.Hex(), secret_,
                        options_.worker_argv, options_.log_dir, options_.prestarted_workers},
      outbox_, devices_, cache_, *zygotes_);
  JobRunnerOptions jo{options_.head_address, id_.Binary(),       id_.Hex().substr(0, 12), secret_,
                      options_.log_dir,      options_.worker_env};
  jobs_ = std::make_unique<JobRunner>(std::move(jo), outbox_, cache_);
  jobs_->SetCgroups(cgroups_.get());
  cache_.SetInUse([this](const std::string& folder) {
    return pool_->UsesFolder(folder) || jobs_->UsesFolder(folder);
  });
}

NodeService::~NodeService() { Stop(); }

Status NodeService::Start(int register_timeout_ms) {
  Status s = inbox_.Bind(options_.bind_host, 0, options_.advertise_host);
  if (!s.ok()) return s;
  std::error_code ec;
  if (own_log_dir_) {  // beside those of earlier embedded nodes: apart from them on the disk
    std::string parent = std::filesystem::path(options_.log_dir).parent_path();
    std::filesystem::create_directories(parent, ec);
    SpreadSubfolders(parent);
  }
  std::filesystem::create_directories(options_.log_dir, ec);
  if (ec)
    return Status::Internal("cannot make the log directory " + options_.log_dir + ": " +
                            ec.message());
  LogMonitorOptions lo;
  lo.head_address = options_.head_address;
  lo.node_id = id_.Hex();
  lo.node_secret = secret_;
  lo.rotate_bytes = options_.log_rotate_bytes;
  lo.rotate_backups = options_.log_rotate_backups;
  logs_ = std::make_unique<LogMonitor>(lo, outbox_);
  logs_->Start();
  jobs_->SetNode(inbox_.address(), logs_.get());
  ObjectPlaneOptions po;
  po.node_id = id_;
  po.bind_host = options_.bind_host;
  po.advertise_host = options_.advertise_host;
  po.capacity = options_.object_store_memory;
  po.spill_root =
      options_.object_spill_dir.empty() ? TmpRoot() + "/spill" : options_.object_spill_dir;
  objects_ = std::make_unique<NodeObjectPlane>(po, inbox_);
  s = objects_->Start();
  if (!s.ok()) return Status(s.code(), "the node's object store: " + s.message());
  pool_->SetNode(inbox_.address(), logs_.get(), objects_.get());
  // The tick is the heartbeat's, or the memory monitor's when that is shorter.
  int tick_ms = int(options_.heartbeat_period_s * 1000);
  if (options_.memory_monitor_refresh_ms > 0)
    tick_ms = std::min(tick_ms, options_.memory_monitor_refresh_ms);
  (void)memory_.Refresh();  // the registration carries a first reading
  if (s = StartMetrics(); !s.ok()) return s;
  // A working_dir package of many files takes seconds to unpack: off the inbox, which every
  // worker's object requests go through.
  cache_.UnpackInBackground(
      [this](std::function<void()> fn) { inbox_.Post(std::move(fn)); },
      [this](const std::string& hash, const ExecutableCache::Fetched& f) { Deliver(hash, f); });
  inbox_.SetTick(std::max(tick_ms, 1), [this] { Tick(); });
  if (zygotes_->fd() >= 0) inbox_.AddFd(zygotes_->fd(), [this] { zygotes_->OnReady(); });
  inbox_.Start([this](transport::Envelope& env) { return Handle(env); }, "orrery-node");
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
  if (Status r = head_.WaitRegistered(register_timeout_ms, 1000,
                                      [this] { inbox_.Post([this] { SendRegistration(true); }); });
      !r.ok()) {
    return r;
  }
  head_.Started();
  head_.StartHeartbeats(options_.heartbeat_period_s);
  LOG_INFO("node " + id_.Hex() + " up at " + inbox_.address() + " with " +
           ToString(options_.resources));
  return Status::Ok();
}

void NodeService::SendRegistration(bool alive) {
  proto::RegisterNodeMsg reg = Registration(alive);
  if (alive) head_.SetHeartbeat(reg);  // what the heartbeat thread repeats
  head_.Send(reg);
}

proto::RegisterNodeMsg NodeService::Registration(bool alive) {
  proto::RegisterNodeMsg reg;
  reg.node = {id_.Binary(),       inbox_.address(),   alive,
              options_.resources, options_.resources, options_.labels};
  if (alive) {  // on the inbox thread, which owns the monitor (Stop's goodbye is not)
    reg.node.memory_used_bytes = memory_.last().used_bytes;
    reg.node.memory_total_bytes = memory_.last().total_bytes;
    reg.node.memory_usage_threshold = memory_.threshold();
    reg.node.object_store = objects_->Usage();
    reg.node.object_store_path = objects_->arena_path();
    reg.node.object_store_tag = objects_->tag();
    reg.node.metrics_address = metrics_address_;
  }
  reg.reply_to = inbox_.address();
  reg.node_secret = secret_;
  return reg;
}

Status NodeService::StartMetrics() {
  if (options_.metrics_port < 0) return Status::Ok();
  metrics_ = std::make_unique<metrics::MetricsServer>();
  auto address = metrics::StartIfEnabled(*metrics_, options_.bind_host, options_.metrics_port,
                                         options_.advertise_host);
  if (!address.ok()) return address.status();
  metrics_address_ = address.value();
  LOG_INFO("node metrics at http://" + metrics_address_ + "/metrics");
  return Status::Ok();
}

void NodeService::Stop() {
  head_.StopHeartbeats();
  if (head_.TakeRegistered()) SendRegistration(false);  // from this thread: the inbox is stopping
  inbox_.Stop();
  jobs_->StopAll();
  zygotes_->StopAll();  // workers die with their zygote
  if (logs_) logs_->Stop();
  if (own_log_dir_) {  // the embedded node's: its driver printed what mattered
    std::error_code ec;
    std::filesystem::remove_all(options_.log_dir, ec);
  }
  if (objects_) objects_->Stop();
  if (metrics_) metrics_->Stop();
  pool_->KillAll();
}

namespace {
RateLimitedLog rejected_log;
RateLimitedLog refused_executable_log;

// Decodes the message as Msg and hands it to `handle`; InvalidArgument when it is not one.
template <typename Msg, typename Handle>
Status Decoded(const transport::Envelope& env, Handle&& handle) {
  Msg m;
  if (Status s = env.Decode(&m); !s.ok()) return s;
  handle(m);
  return Status::Ok();
}
}  // namespace

Status NodeService::Handle(transport::Envelope& env) {
  std::optional<Status> s;
  if (objects_) s = objects_->Handle(env);
  if (!s) s = Dispatch(env);
  if (s->ok()) return *s;
  uint64_t suppressed = 0;
  if (rejected_log.ShouldLog(&suppressed))
    LOG_WARN(std::string("node: rejected a ") + proto::TypeName(env.type) + ": " + s->message() +
             RateLimitedLog::More(suppressed));
  return *s;  // the inbox answers the sending socket with kError
}

Status NodeService::Dispatch(const transport::Envelope& env) {
  switch (env.type) {
    case MsgType::kAck:
      return OnHeadAck(env);
    case MsgType::kStartActor:
      return Decoded<proto::StartActorMsg>(env, [&](const auto& m) { pool_->OnStartActor(m); });
    case MsgType::kGrantLease:
      return Decoded<proto::GrantLeaseMsg>(env,
                                           [&](const auto& m) { pool_->OnGrantLease(m.request); });
    case MsgType::kReleaseLease:
      return Decoded<proto::ReleaseLeaseMsg>(
          env, [&](const auto& m) { pool_->OnReleaseLease(m.lease_id); });
    case MsgType::kKillWorker:
      return Decoded<proto::KillWorkerMsg>(env, [&](const auto& m) { pool_->OnKillWorker(m); });
    case MsgType::kWorkerRegister:
      return Decoded<proto::WorkerRegisterMsg>(env,
                                               [&](const auto& m) { pool_->OnWorkerRegister(m); });
    case MsgType::kAssignReply:
      return Decoded<proto::AssignReplyMsg>(env, [&](const auto& m) { pool_->OnAssignReply(m); });
    case MsgType::kPing:
      return Decoded<proto::PingMsg>(env, [&](const auto& m) {
        if (!m.reply_to.empty()) outbox_.Send(m.reply_to, MsgType::kPong, m);
      });
    case MsgType::kStartJob:
      return Decoded<proto::StartJobMsg>(
          env, [&](const auto& m) { jobs_->OnStart(m, inbox_.address()); });
    case MsgType::kStopJob:
      return Decoded<proto::StopJobMsg>(env, [&](const auto& m) { jobs_->OnStop(m); });
    case MsgType::kListWorkers:
      return Decoded<proto::ListWorkersMsg>(env, [&](const auto& m) { OnListWorkers(m); });
    case MsgType::kWorkerStats:
      return Decoded<proto::WorkerStatsMsg>(env, [&](const auto& m) { pool_->OnWorkerStats(m); });
    case MsgType::kBinaryReply:
      return Decoded<proto::BinaryMsg>(
          env, [&](const auto& m) { OnBinaryReply(m, env.PayloadString()); });
    case MsgType::kError: {
      proto::ErrorMsg m;
      (void)env.Decode(&m);  // what can be read of it is logged
      LOG_WARN("node: a peer rejected a message: " + m.message);
      return Status::Ok();
    }
    default:
      return Status::InvalidArgument(std::string("the node does not handle ") +
                                     proto::TypeName(env.type));
  }
}

Status NodeService::OnHeadAck(const transport::Envelope& env) {
  proto::AckMsg ack;
  if (Status d = env.Decode(&ack); !d.ok()) return d;
  if (ack.request_id != 0 &&
      (pool_->OnEventAck(ack.request_id) || jobs_->OnEventAck(ack.request_id)))
    return Status::Ok();
  (void)head_.OnAck(ack);  // a refusal is the head's answer (HeadLink acts on it), not an error
  return Status::Ok();
}

void NodeService::OnBinaryReply(const proto::BinaryMsg& m, std::string bytes) {
  Result<ExecutableCache::Fetched> fetched = cache_.OnReply(m, std::move(bytes));
  if (!fetched.ok()) return;  // answers no request of this node (logged)
  Deliver(m.hash, fetched.value());
}

void NodeService::Deliver(const std::string& hash, const ExecutableCache::Fetched& fetched) {
  const std::string& error = fetched.error;
  if (uint64_t suppressed = 0; !error.empty() && refused_executable_log.ShouldLog(&suppressed))
    LOG_WARN(std::string("node: could not get the ") +
             (fetched.package ? "working_dir " : "executable ") + hash + ": " + error +
             RateLimitedLog::More(suppressed));
  for (const auto& waiter : fetched.waiters) {
    if (waiter.rfind(JobRunner::kWaiter, 0) == 0) {
      jobs_->OnExecutable(waiter.substr(std::strlen(JobRunner::kWaiter)), hash, fetched.package,
                          error);
    } else {
      pool_->OnExecutable(waiter, hash, fetched.package, error);
    }
  }
}

void NodeService::Tick() {
  CheckMemory();
  cache_.Resend(Now());
  for (const auto& [hash, fetched] : cache_.Expire(Now())) Deliver(hash, fetched);
  jobs_->Check();
  if (cgroups_) cgroups_->Sweep();
  RenderMetrics(Now());
  pool_->Replenish(Now());
  pool_->ResendEvents(Now());
  jobs_->ResendEvents(Now());
  // The tick may be the memory monitor's, shorter than the heartbeat's period: refresh the
  // heartbeat on the tick nearest to its period, never later. The heartbeat thread sends
  // the latest one every period even when this loop is held up.
  double now = Now(), hb = options_.heartbeat_period_s;
  double tick = options_.memory_monitor_refresh_ms > 0
                    ? std::min(hb, options_.memory_monitor_refresh_ms / 1000.0)
                    : hb;
  if (now - last_heartbeat_ < hb - tick / 2) return;
  last_heartbeat_ = now;
  head_.SetHeartbeat(Registration(true));  // the heartbeat thread sends it
  objects_->Tick(now);
  // Idle task workers beyond the kept pool go after a while.
  pool_->ReapIdle(now, options_.idle_workers_kept, options_.idle_worker_timeout_s);
  transport::SampleLocalSockets();  // files of processes killed where no node saw them end
}

void NodeService::RenderMetrics(double now) {
  if (!metrics_ || now - metrics_rendered_ < 1.0) return;
  metrics_rendered_ = now;
  NodeMetricsInput in;
  in.node_id = id_.Hex();
  for (const auto& [id, w] : pool_->workers()) {
    if (w.pid > 0) ++in.worker_kinds[w.is_actor ? "actor" : w.has_lease ? "task" : "idle"];
  }
  in.object_store = objects_->Usage();
  in.calls = pool_->call_stats().Sum();
  metrics_->SetSnapshot(NodeMetricsText(in));
}

void NodeService::CheckMemory() {
  if (!memory_.Refresh() || options_.memory_monitor_refresh_ms <= 0) return;
  double now = Now();
  // One kill at a time: the victim's memory is back only once its process is gone.
  if (!oom_victim_.empty() && pool_->Has(oom_victim_) && now - oom_victim_since_ < kOomVictimGraceS)
    return;
  std::vector<OomCandidate> candidates;
  std::vector<const WorkerPool::Worker*> running;
  for (const auto& [id, w] : pool_->workers()) {
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
  const WorkerPool::Worker& w = *running[size_t(i)];
  std::string victim = "the worker (pid " + std::to_string(w.pid) + ") " +
                       (w.is_actor ? "of actor " + UniqueId::FromBinary(w.actor.spec.actor_id).Hex()
                                   : "running a task");
  std::string message = OutOfMemoryMessage(id_.Hex(), memory_.last(), memory_.threshold(), victim);
  LOG_WARN(message);
  oom_victim_ = w.id;
  oom_victim_since_ = now;
  pool_->KillAs(w.id, proto::ErrorKind::kOutOfMemoryError, message);
}

}  // namespace orrery::node
