// The public API's entry points: process roles, Init/Shutdown, and the functions that the
// header templates call.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "actors/internal/runtime.h"
#include "actors/internal/test_hooks.h"
#include "actors/src/errors_util.h"
#include "actors/src/shutdown_step.h"
#include "actors/src/worker.h"
#include "core/internal/log.h"
#include "core/internal/redis_store.h"
#include "core/internal/security.h"
#include "core/internal/session_dir.h"
#include "core/internal/thread_annotations.h"
#include "node/internal/node_options.h"
#include "node/internal/node_service.h"
#include "node/internal/zygote.h"
#include "orrery/orrery.h"
#include "orrery/resources.h"
#include "scheduler/internal/head_service.h"

namespace orrery {

namespace {

struct Embedded {
  std::unique_ptr<scheduler::HeadService> head;
  std::unique_ptr<node::NodeService> node;
  std::unique_ptr<runtime::Runtime> runtime;
};

Mutex g_mu;  // serialises Init and Shutdown
Embedded* g_state GUARDED_BY(g_mu) = nullptr;

runtime::Runtime& Rt() { return runtime::CurrentOrThrow(); }

void RaiseFileLimit() {
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// The embedded cluster's token: made once per process and kept across Init/Shutdown, in a
// file only this user can read (in a 0700 directory), which its workers are pointed at.
// Removed when the process exits (those of drivers that were killed: MakeEmbeddedFolder).
std::string EmbeddedTokenFile() {
  static std::string file;
  if (!file.empty() && access(file.c_str(), R_OK) == 0) return file;
  std::string dir = MakeEmbeddedFolder();
  if (dir.empty()) {
    throw ConfigError("cannot create a directory for the embedded cluster's token under " +
                      SessionRoot());
  }
  Status s = security::WriteSecretFile(dir + "/token", security::NewToken());
  if (!s.ok()) throw ConfigError("the embedded cluster's token: " + s.message());
  static bool cleanup_registered = false;
  if (!cleanup_registered) {
    cleanup_registered = true;
    std::atexit([] {
      if (file.empty()) return;
      unlink(file.c_str());
      rmdir(file.substr(0, file.rfind('/')).c_str());
    });
  }
  file = dir + "/token";
  return file;
}

// Sets this process's credentials (docs/security.md) and what its workers are told.
void UseDriverCredentials(const Config& config, const std::string& head_address,
                          std::map<std::string, std::string>* worker_env) {
  std::string token_file = config.token_file;
  if (!config.insecure && token_file.empty() && head_address.empty())
    token_file = EmbeddedTokenFile();
  auto used = security::UseCredentials(config.insecure, token_file, head_address);
  if (!used.ok()) {
    if (used.status().code() == StatusCode::kPermissionDenied)
      throw ConnectionError(used.status().message());
    throw ConfigError(used.status().message());
  }
  if (config.insecure) {
    LOG_WARN("Config::insecure: this driver's connections are neither authenticated nor encrypted");
  }
  if (!worker_env) return;
  if (config.insecure) {
    (*worker_env)["ORRERY_INSECURE"] = "1";
  } else {
    (*worker_env)["ORRERY_TOKEN_FILE"] = used.value();
  }
}

std::string WithScheme(const std::string& address) {
  return address.find("://") == std::string::npos ? "tcp://" + address : address;
}

// Init's configuration: flags, then the environment, validated (ConfigError otherwise).
Config ResolveInitConfig(Config config, int argc, char** argv) {
  if (argc > 0 && argv) {
    std::vector<char*> copy(argv, argv + argc);
    copy.push_back(nullptr);
    int n = argc;
    config = ApplyFlags(config, &n, copy.data());
  }
  config = ApplyEnvironment(config);
  ValidateConfig(config);
  log::SetLevel(config.log_level.empty() ? "warn" : config.log_level);
  auto errors = internal::RegistrationErrors();
  if (!errors.empty()) {
    std::string msg = "ORRERY_REMOTE registration failed:";
    for (const auto& e : errors) msg += "\n  " + e;
    throw ConfigError(msg);
  }
  Status rs = ValidateResources(config.resources);
  if (!rs.ok()) throw ConfigError("Config::resources: " + rs.message());
  return config;
}

// The embedded head (docs/getting-started.md, "the embedded default"), on Redis when
// Config::redis_address names one.
std::unique_ptr<scheduler::HeadService> StartEmbeddedHead(const Config& config,
                                                          const std::string& host,
                                                          const std::string& advertise) {
  scheduler::HeadOptions ho;
  ho.bind_host = host;
  ho.advertise_host = advertise;
  ho.max_message_bytes = config.max_message_bytes;
  if (!config.redis_address.empty()) {
    // The password of an external Redis comes from ORRERY_REDIS_PASSWORD_FILE.
    auto password = ReadRedisPassword("");
    if (!password.ok())
      throw ConfigError("ORRERY_REDIS_PASSWORD_FILE: " + password.status().message());
    auto store = RedisStateStore::Connect(config.redis_address, "default", password.value());
    if (!store.ok()) throw ConnectionError("state store: " + store.status().message());
    ho.store = store.value();
  }
  auto head = std::make_unique<scheduler::HeadService>(ho);
  Status s = head->Start();
  if (!s.ok()) throw ConnectionError("cannot start the embedded head: " + s.message());
  return head;
}

// The embedded node: this host's CPUs, memory and accelerators (plus Config::resources),
// running this executable as its workers.
std::unique_ptr<node::NodeService> StartEmbeddedNode(
    const Config& config, const std::string& host, const std::string& advertise,
    const std::string& head_address, const std::map<std::string, std::string>& credential_env) {
  node::HostResources this_host;
  this_host.num_cpus = config.num_cpus;
  this_host.resources = config.resources;
  this_host.labels = config.labels;
  Result<node::NodeOptions> from_host = node::NodeOptionsFromHost(this_host);
  if (!from_host.ok()) throw ConfigError(from_host.status().message());
  node::NodeOptions no = std::move(from_host).value();
  no.head_address = head_address;
  no.bind_host = host;
  no.advertise_host = advertise;  // its workers read the same $ORRERY_ADVERTISE_ADDRESS
  no.memory_usage_threshold = config.memory_usage_threshold;
  no.memory_monitor_refresh_ms = config.memory_monitor_refresh_ms;
  no.prestarted_workers = config.prestarted_workers;
  no.object_store_memory = uint64_t(config.object_store_memory);
  no.object_spill_dir = config.object_spill_dir;
  no.worker_argv = runtime::SelfCommandLine();
  if (!config.log_level.empty()) no.worker_env["ORRERY_LOG_LEVEL"] = config.log_level;
  if (!config.namespace_.empty()) no.worker_env["ORRERY_NAMESPACE"] = config.namespace_;
  no.worker_env["ORRERY_INFEASIBLE_TIMEOUT_S"] = std::to_string(config.infeasible_timeout_s);
  no.worker_env["ORRERY_ADDRESS"] = "";
  for (const auto& [k, v] : credential_env) no.worker_env[k] = v;
  auto node = std::make_unique<node::NodeService>(no);
  Status s = node->Start();
  if (!s.ok()) throw ConnectionError("cannot start the embedded node: " + s.message());
  return node;
}

// The head at Config::address; a wrong or missing credential fails here at once, saying so,
// rather than as a timeout.
std::string CheckRemoteHead(const Config& config) {
  std::string head_address = WithScheme(config.address);
  Status probe = security::ProbeHandshake(head_address, 2000);
  if (probe.code() == StatusCode::kPermissionDenied) {
    throw ConnectionError(
        security::AuthFailedMessage(head_address, security::ProcessCredentials()) + " (" +
        probe.message() + ")");
  }
  return head_address;
}

// Large values go through the object store of a node on this host: the embedded node, or in a
// cluster the node whose arena this process can map (docs/objects.md "Which store a process
// uses"). With none, they stay in this process and readers pull them from it.
void UseLocalObjectStore(Embedded& state) {
  auto& objects = state.runtime->objects();
  if (state.node) {
    objects.SetNode(state.node->address());
    return;
  }
  try {
    for (const auto& n : state.runtime->ClusterInfo()) {
      if (n.alive && !n.object_store_path.empty() &&
          objects.TryAttach(n.address, n.object_store_path, n.object_store_tag))
        return;
    }
  } catch (const Error& e) {
    LOG_WARN(std::string("cannot list the cluster's nodes to find a local object store: ") +
             e.what());
  }
}

void DoInit(Config config, int argc, char** argv) {
  RunWorkerIfRequested(argc, argv);
  MutexLock lock(&g_mu);
  if (g_state)
    throw ConfigError("orrery::Init() was already called; call orrery::Shutdown() first");
  config = ResolveInitConfig(std::move(config), argc, argv);
  RaiseFileLimit();

  auto state = std::make_unique<Embedded>();
  std::string host = config.node_ip.empty() ? "127.0.0.1" : config.node_ip;
  auto advertise = runtime::AdvertiseAddressFromEnv();
  if (!advertise.ok()) throw ConfigError(advertise.status().message());
  std::string head_address;
  std::map<std::string, std::string> credential_env;
  UseDriverCredentials(config, config.address.empty() ? "" : WithScheme(config.address),
                       &credential_env);
  if (config.address.empty()) {
    state->head = StartEmbeddedHead(config, host, advertise.value());
    head_address = state->head->address();
    state->node = StartEmbeddedNode(config, host, advertise.value(), head_address, credential_env);
  } else {
    head_address = CheckRemoteHead(config);
  }
  state->runtime = std::make_unique<runtime::Runtime>(config, head_address, JobId::Random(),
                                                      "driver pid " + std::to_string(getpid()));
  Status s = state->runtime->Start(host, advertise.value());
  if (!s.ok()) throw ConnectionError("cannot start the driver runtime: " + s.message());
  runtime::SetCurrent(state->runtime.get());
  try {
    state->runtime->RegisterJob();  // fails with ConnectionError when no head answers
  } catch (...) {
    runtime::SetCurrent(nullptr);
    throw;
  }
  UseLocalObjectStore(*state);
  static bool atexit_registered = false;
  if (!atexit_registered) {
    atexit_registered = true;
    std::atexit([] {
      if (IsInitialized()) Shutdown();
    });
  }
  g_state = state.release();
}

}  // namespace

void RunWorkerIfRequested(int, char**) {
  const char* role = std::getenv("ORRERY_ROLE");
  if (!role) return;
  std::string r = role;
  if (r == "zygote") {
    const char* fd = std::getenv("ORRERY_ZYGOTE_FD");
    node::ZygoteMain(fd ? std::atoi(fd) : -1, &runtime::WorkerMain);
  }
  if (r == "worker") runtime::WorkerMain();
}

void Init() { DoInit(Config{}, 0, nullptr); }
void Init(const Config& config) { DoInit(config, 0, nullptr); }
void Init(int argc, char** argv) { DoInit(Config{}, argc, argv); }
void Init(const Config& config, int argc, char** argv) { DoInit(config, argc, argv); }

bool IsInitialized() { return runtime::Current() != nullptr; }

void Shutdown() {
  MutexLock lock(&g_mu);
  if (!g_state) return;
  std::unique_ptr<Embedded> state(g_state);
  g_state = nullptr;
  runtime::ShutdownStep("killing the job's actors", [&] { state->runtime->KillOwnedActors(); });
  runtime::ShutdownStep("ending the job", [&] { state->runtime->EndJob(); });
  runtime::SetCurrent(nullptr);
  state->runtime->Stop();
  if (state->node) state->node->Stop();
  if (state->head) state->head->Stop();
  transport::CloseThreadSockets();
}

RuntimeContext GetRuntimeContext() {
  RuntimeContext ctx;
  auto env = [](const char* k) {
    const char* v = std::getenv(k);
    return std::string(v ? v : "");
  };
  ctx.worker_id = env("ORRERY_WORKER_ID");
  ctx.is_worker = !ctx.worker_id.empty();
  ctx.node_id = env("ORRERY_NODE_ID");
  // ORRERY_NODE_ADDRESS is the node's ZeroMQ endpoint, tcp://<ip>:<port>.
  std::string node = env("ORRERY_NODE_ADDRESS");
  if (node.rfind("tcp://", 0) == 0) node = node.substr(6);
  ctx.node_ip = node.substr(0, node.rfind(':'));
  std::string ids = env("ORRERY_ACCELERATOR_IDS");
  if (!ids.empty()) {
    try {
      ctx.accelerator_ids =
          nlohmann::json::parse(ids).get<std::map<std::string, std::vector<int>>>();
    } catch (const std::exception& e) {
      throw Error("ORRERY_ACCELERATOR_IDS is malformed: " + std::string(e.what()));
    }
  }
  return ctx;
}

namespace {
// A count from the head, which clamps them far below int64's limit; a head that did not
// reads as that limit, never as a negative number.
int64_t ToInt64(uint64_t v) {
  return int64_t(std::min<uint64_t>(v, uint64_t(std::numeric_limits<int64_t>::max())));
}
}  // namespace

std::vector<NodeInfo> Nodes() {
  std::vector<NodeInfo> out;
  for (const auto& n : Rt().ClusterInfo()) {
    const proto::ObjectStoreUsageMsg& store = n.object_store;
    out.push_back(NodeInfo{NodeId(UniqueId::FromBinary(n.node_id)), n.address, n.alive, n.total,
                           n.available, n.labels, n.memory_used_bytes, n.memory_total_bytes,
                           n.memory_usage_threshold, ToInt64(store.used_bytes),
                           ToInt64(store.capacity_bytes), ToInt64(store.spilled_bytes),
                           ToInt64(store.num_objects), n.suspected});
  }
  return out;
}

Resources ClusterResources() {
  Resources out;
  for (const auto& n : Rt().ClusterInfo())
    if (n.alive) Add(out, n.total);
  return out;
}

Resources AvailableResources() {
  Resources out;
  for (const auto& n : Rt().ClusterInfo())
    if (n.alive) Add(out, n.available);
  return out;
}

// ------------------------------------------------------------------ placement groups

PlacementGroup CreatePlacementGroup(const PlacementGroupCreationOptions& options) {
  if (options.bundles.empty()) throw ConfigError("a placement group needs at least one bundle");
  for (size_t i = 0; i < options.bundles.size(); ++i) {
    const auto& b = options.bundles[i];
    if (b.empty())
      throw ConfigError("bundle " + std::to_string(i) + " of the placement group is empty");
    Status s = ValidateResources(b);
    if (!s.ok()) throw ConfigError("bundle " + std::to_string(i) + ": " + s.message());
  }
  proto::PlacementGroupMsg m;
  PlacementGroupId id = PlacementGroupId::Random();
  m.pg_id = id.Binary();
  m.name = options.name;
  m.bundles = options.bundles;
  m.strategy = int(options.strategy);
  m.same_label = options.same_label;
  m.label_selector = options.label_selector;
  auto reply = Rt().PlacementGroupRpc(proto::MsgType::kCreatePlacementGroup, m, 30000);
  if (!reply.ok) runtime::ThrowKind(reply.error_kind, reply.message);
  PlacementGroup pg(id, options);
  if (reply.ready) pg.MarkReadyAtCreation();
  return pg;
}

namespace {
Mutex g_removed_mu;
std::set<PlacementGroupId> g_removed GUARDED_BY(g_removed_mu);  // groups this process removed
}  // namespace

bool PlacementGroup::Wait(double timeout_seconds) const {
  if (ready_at_creation_) {
    MutexLock lock(&g_removed_mu);
    if (!g_removed.count(id_)) return true;
  }
  proto::PlacementGroupMsg m;
  m.pg_id = id_.Binary();
  m.timeout_s = timeout_seconds < 0 ? -1 : timeout_seconds;
  int rpc_timeout =
      timeout_seconds < 0 ? std::numeric_limits<int>::max() : int(timeout_seconds * 1000) + 10000;
  auto reply = Rt().PlacementGroupRpc(proto::MsgType::kWaitPlacementGroup, m, rpc_timeout);
  return reply.ok && reply.ready;
}

void RemovePlacementGroup(const PlacementGroupId& id) {
  {
    MutexLock lock(&g_removed_mu);
    g_removed.insert(id);
  }
  Rt().RemovePlacementGroup(id);
}

std::optional<PlacementGroup> GetPlacementGroup(const std::string& name) {
  proto::PlacementGroupMsg m;
  m.name = name;
  m.timeout_s = 0;
  auto reply = Rt().PlacementGroupRpc(proto::MsgType::kWaitPlacementGroup, m, 30000);
  if (!reply.ok) return std::nullopt;
  PlacementGroupCreationOptions o;
  o.name = reply.name;
  o.bundles = reply.bundles;
  o.strategy = PlacementStrategy(reply.strategy);
  return PlacementGroup(PlacementGroupId(UniqueId::FromBinary(reply.pg_id)), o);
}

// ------------------------------------------------------------------ internal entry points

namespace internal {

RefHolder::RefHolder(ObjectId id, std::string owner)
    : id_(std::move(id)), owner_(std::move(owner)) {
  auto* rt = runtime::Current();
  if (!rt) return;
  // A ref to another process's object: this process borrows it (the store tells the owner).
  bool mine = owner_.empty() || owner_ == rt->address();
  rt->store().AddRef(id_, mine ? std::string() : owner_);
}

RefHolder::~RefHolder() {
  if (auto* rt = runtime::Current()) rt->store().RemoveRef(id_);
}

std::shared_ptr<RefHolder> MakeRef(const ObjectId& id, const std::string& owner) {
  return std::make_shared<RefHolder>(id, owner);
}

std::shared_ptr<RefHolder> SubmitTask(const std::string& function, std::vector<ArgSlot> args,
                                      const CallOptions& options) {
  return Rt().SubmitTask(function, std::move(args), options);
}

ActorId CreateActor(const std::string& factory, std::vector<ArgSlot> args,
                    const CallOptions& options) {
  return Rt().CreateActor(factory, std::move(args), options);
}

std::shared_ptr<RefHolder> SubmitActorTask(const ActorId& actor, const std::string& method,
                                           std::vector<ArgSlot> args) {
  if (actor.IsNil()) throw Error("this ActorHandle does not refer to an actor");
  return Rt().SubmitActorTask(actor, method, std::move(args));
}

std::vector<bool> WaitRefs(const std::vector<const RefHolder*>& refs, int num_returns,
                           int timeout_ms) {
  return Rt().Wait(refs, num_returns, timeout_ms);
}

ActorId GetNamedActor(const std::string& name, const std::string& namespace_) {
  return Rt().GetNamedActor(name, namespace_);
}

void KillActor(const ActorId& actor, bool no_restart) { Rt().KillActor(actor, no_restart); }

std::string HeadAddressForTest() { return Rt().head_address(); }
std::string WorkerAddressForTest() { return Rt().address(); }

}  // namespace internal
}  // namespace orrery
