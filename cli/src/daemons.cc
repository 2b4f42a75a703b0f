#include "cli/src/daemons.h"

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/src/duration.h"
#include "cli/src/ready_file.h"
#include "core/internal/advertised_host.h"
#include "core/internal/log.h"
#include "core/internal/redis_store.h"
#include "core/internal/security.h"
#include "node/internal/node_options.h"
#include "node/internal/node_service.h"
#include "scheduler/internal/head_service.h"

namespace orrery::cli {

namespace {
// Blocks SIGTERM/SIGINT in every thread (call before any thread starts), then waits for one.
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// Workers find the head the node joined, listen where the node does (so callers on other
// hosts reach them) and are named as the node is (a pod's IP when the node binds 0.0.0.0).
void SetWorkerAddresses(const NodeFlags& flags, node::NodeOptions* no) {
  no->worker_env["ORRERY_ADDRESS"] = flags.address;
  if (flags.bind != "127.0.0.1") no->worker_env["ORRERY_NODE_IP"] = flags.bind;
  if (!flags.advertise.empty()) no->worker_env["ORRERY_ADVERTISE_ADDRESS"] = flags.advertise;
}

// The port of an address that ends in ":PORT" (an inbox's tcp://host:port).
int PortOf(const std::string& address) {
  return std::atoi(address.c_str() + address.rfind(':') + 1);
}
}  // namespace

Result<std::string> UseDaemonCredentials(const CredentialFlags& flags,
                                         const std::string& head_address) {
  std::string file = flags.token_file;
  bool insecure = flags.insecure;
  if (file.empty() && !insecure) {
    const char* env = std::getenv("ORRERY_TOKEN_FILE");
    if (env && *env) file = env;
  }
  if (file.empty() && !insecure) {
    const char* env = std::getenv("ORRERY_INSECURE");
    insecure = env && (std::string(env) == "1" || std::string(env) == "true");
  }
  if (flags.insecure && !flags.token_file.empty()) {
    return Status::InvalidArgument(
        "--insecure and --token-file contradict each other: an insecure daemon uses no token");
  }
  if (insecure)
    LOG_WARN("running with --insecure: anyone who can reach this process's ports can control it");
  return security::UseCredentials(insecure, file, head_address);
}

int RunHead(const HeadFlags& flags) {
  sigset_t set = BlockStopSignals();
  log::SetLevel("info");
  log::SetProcessTag("head");
  if (auto used = UseDaemonCredentials(flags.credentials, ""); !used.ok()) {
    std::fprintf(stderr, "orrery head: %s\n", used.status().message().c_str());
    return 1;
  }
  scheduler::HeadOptions ho;
  ho.bind_host = flags.bind;
  ho.advertise_host = flags.advertise;
  ho.port = flags.port;
  ho.health_check_period_s = flags.health_period_s;
  ho.health_check_failure_threshold = flags.health_threshold;
  auto ttl = ParseDuration(flags.history_ttl);
  if (!ttl.ok()) {
    std::fprintf(stderr, "orrery head: --history-ttl: %s\n", ttl.status().message().c_str());
    return 2;
  }
  ho.history_ttl_s = ttl.value();
  ho.metrics_port = flags.metrics_port;
  if (!flags.redis_address.empty()) {
    auto password = ReadRedisPassword(flags.redis_password_file);
    if (!password.ok()) {
      std::fprintf(stderr, "orrery head: Redis password: %s\n",
                   password.status().message().c_str());
      return 1;
    }
    auto store = RedisStateStore::Connect(flags.redis_address, "default", password.value());
    if (!store.ok()) {
      std::fprintf(stderr, "orrery head: %s\n", store.status().message().c_str());
      return 1;
    }
    ho.store = store.value();
  }
  scheduler::HeadService head(ho);
  Status s = head.Start();
  if (!s.ok()) {
    std::fprintf(stderr, "orrery head: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("head listening on %s\n", head.address().c_str());
  if (!head.metrics_address().empty())
    std::printf("head metrics at http://%s/metrics\n", head.metrics_address().c_str());
  std::fflush(stdout);
  if (!flags.ready_file.empty()) {
    if (Status w = WriteReadyFile(flags.ready_file, head.address(), PortOf(head.address()),
                                  {{"metrics_address", head.metrics_address()}});
        !w.ok()) {
      std::fprintf(stderr, "orrery head: %s\n", w.message().c_str());
      head.Stop();
      return 1;
    }
  }
  int sig = 0;
  sigwait(&set, &sig);
  head.Stop();
  return 0;
}

namespace {
// Says where the node serves, writes its ready file, then serves until a stop signal (in
// `set`, blocked) or the head's refusal; returns the exit status (1 when refused).
int ServeNode(node::NodeService& node, const NodeFlags& flags, const sigset_t* set) {
  std::printf("node %s up at %s\n", node.id().Hex().c_str(), node.address().c_str());
  if (!node.metrics_address().empty())
    std::printf("node metrics at http://%s/metrics\n", node.metrics_address().c_str());
  std::fflush(stdout);
  if (!flags.ready_file.empty()) {
    if (Status w = WriteReadyFile(
            flags.ready_file, node.address(), PortOf(node.address()),
            {{"node_id", node.id().Hex()}, {"metrics_address", node.metrics_address()}});
        !w.ok()) {
      std::fprintf(stderr, "orrery node: %s\n", w.message().c_str());
      node.Stop();
      return 1;
    }
  }
  int sig = 0;
  sigwait(set, &sig);
  node.Stop();
  if (Status refused = node.refusal(); !refused.ok()) {
    std::fprintf(stderr, "orrery node: %s\n", refused.message().c_str());
    return 1;
  }
  return 0;
}
}  // namespace

int RunNode(const NodeFlags& flags) {
  sigset_t set = BlockStopSignals();
  log::SetLevel("info");
  log::SetProcessTag("node");
  // This host's resources, labels and accelerators (flags and --resources override what is
  // detected).
  node::HostResources host;
  host.num_cpus = flags.num_cpus;
  host.memory = flags.memory;
  host.resources = flags.resources;
  host.labels = flags.labels;
  Result<node::NodeOptions> from_host = node::NodeOptionsFromHost(host);
  if (!from_host.ok()) {
    std::fprintf(stderr, "orrery node: %s\n", from_host.status().message().c_str());
    return 1;
  }
  node::NodeOptions no = std::move(from_host).value();
  no.head_address =
      flags.address.find("://") == std::string::npos ? "tcp://" + flags.address : flags.address;
  auto used = UseDaemonCredentials(flags.credentials, no.head_address);
  if (!used.ok()) {
    std::fprintf(stderr, "orrery node: %s\n", used.status().message().c_str());
    return 1;
  }
  // A wrong token fails the node at once, saying so, instead of a node that never joins.
  if (Status probe = security::ProbeHandshake(no.head_address, 5000);
      probe.code() == StatusCode::kPermissionDenied) {
    std::fprintf(
        stderr, "orrery node: %s (%s)\n",
        security::AuthFailedMessage(no.head_address, security::ProcessCredentials()).c_str(),
        probe.message().c_str());
    return 1;
  }
  if (used.value().empty()) {
    no.worker_env["ORRERY_INSECURE"] = "1";
  } else {
    no.worker_env["ORRERY_TOKEN_FILE"] = used.value();
  }
  no.bind_host = flags.bind;
  no.advertise_host = flags.advertise;
  no.heartbeat_period_s = flags.heartbeat_s;
  no.memory_usage_threshold = flags.memory_usage_threshold;
  no.memory_monitor_refresh_ms = flags.memory_monitor_refresh_ms;
  no.prestarted_workers = flags.prestarted_workers;
  no.object_store_memory = flags.object_store_memory;
  no.object_spill_dir = flags.object_spill_dir;
  no.log_dir = flags.log_dir;
  if (flags.log_rotate_bytes > 0) no.log_rotate_bytes = flags.log_rotate_bytes;
  if (flags.log_rotate_backups >= 0) no.log_rotate_backups = flags.log_rotate_backups;
  no.metrics_port = flags.metrics_port;
  SetWorkerAddresses(flags, &no);
  // A node the head refuses later (a heartbeat answered with a refusal) ends as a stop
  // signal would end it, then exits non-zero with the head's reason.
  no.on_refused = [](const Status&) { kill(getpid(), SIGTERM); };
  node::NodeService node(no);
  Status s = node.Start();
  if (!s.ok()) {
    std::fprintf(stderr, "orrery node: %s\n", s.message().c_str());
    return 1;
  }
  return ServeNode(node, flags, &set);
}

void AddAdvertiseFlag(CLI::App* app, std::string* advertise) {
  auto check = [](const std::string& value) -> std::string {
    Status s = text::CheckAdvertisedHost(value);
    return s.ok() ? std::string() : s.message();
  };
  app->add_option("--advertise-address", *advertise,
                  "the address other hosts reach this one at, published instead of the --bind "
                  "address (an IPv4 address or a host name, e.g. a pod's IP)")
      ->check(CLI::Validator(check, "HOST"));
}

void AddCredentialFlags(CLI::App* app, CredentialFlags* flags) {
  app->add_option(
      "--token-file", flags->token_file,
      "the cluster token (default $ORRERY_TOKEN_FILE, else this host's session of that head)");
  app->add_flag("--insecure", flags->insecure,
                "no authentication or encryption (a cluster started with --insecure)");
}

void AddDaemonCommands(CLI::App& app, DaemonCommands* c) {
  constexpr const char* kReadyHelp =
      "once serving, write {\"pid\",\"address\",\"port\"} as JSON to this file (docs/cli.md)";
  HeadFlags& hf = c->head_flags;
  c->head = app.add_subcommand("head", "run a head daemon in the foreground");
  c->head->add_option("--port", hf.port, "port (0: any free port)")->check(CLI::Range(0, 65535));
  c->head->add_option("--bind", hf.bind);
  AddAdvertiseFlag(c->head, &hf.advertise);
  c->head->add_option("--redis-address", hf.redis_address);
  c->head->add_option("--redis-password-file", hf.redis_password_file,
                      "default $ORRERY_REDIS_PASSWORD_FILE");
  c->head->add_option("--health-check-period-s", hf.health_period_s)->check(CLI::PositiveNumber);
  c->head->add_option("--health-check-failure-threshold", hf.health_threshold)
      ->check(CLI::PositiveNumber);
  c->head->add_option("--ready-file", hf.ready_file, kReadyHelp);
  c->head->add_option("--history-ttl", hf.history_ttl, kHistoryTtlHelp)
      ->check(CLI::Validator(CheckDuration, "DURATION"));
  constexpr const char* kMetricsHelp =
      "serve Prometheus metrics at http://<bind>:P/metrics (0: any free port; -1: none)";
  c->head->add_option("--metrics-port", hf.metrics_port, kMetricsHelp)
      ->check(CLI::Range(-1, 65535));
  AddCredentialFlags(c->head, &hf.credentials);
  NodeFlags& nf = c->node_flags;
  c->node = app.add_subcommand("node", "run a node daemon in the foreground");
  c->node->add_option("--address", nf.address, "the head (host:port)")->required();
  c->node->add_option("--bind", nf.bind);
  AddAdvertiseFlag(c->node, &nf.advertise);
  c->node->add_option("--heartbeat-s", nf.heartbeat_s)->check(CLI::PositiveNumber);
  c->node->add_option("--ready-file", nf.ready_file, kReadyHelp);
  c->node->add_option("--metrics-port", nf.metrics_port, kMetricsHelp)
      ->check(CLI::Range(-1, 65535));
  AddCredentialFlags(c->node, &nf.credentials);
  c->node_resources.Add(c->node);
}

int RunNodeCommand(DaemonCommands& c) {
  Config parsed = c.node_resources.Parsed();
  NodeFlags& nf = c.node_flags;
  nf.num_cpus = c.node_resources.num_cpus;
  nf.memory = c.node_resources.memory;
  nf.memory_usage_threshold = parsed.memory_usage_threshold;
  nf.memory_monitor_refresh_ms = parsed.memory_monitor_refresh_ms;
  nf.prestarted_workers = parsed.prestarted_workers;
  nf.object_store_memory = uint64_t(parsed.object_store_memory);
  nf.object_spill_dir = parsed.object_spill_dir;
  nf.log_dir = c.node_resources.log_dir;
  nf.log_rotate_bytes = c.node_resources.LogRotateBytes();
  nf.log_rotate_backups = c.node_resources.log_rotate_backups;
  nf.resources = parsed.resources;
  nf.labels = parsed.labels;
  return RunNode(nf);
}

}  // namespace orrery::cli
