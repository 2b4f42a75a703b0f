// orrery::Config: how a driver (or daemon) is configured. An aggregate, so designated
// initializers work: orrery::Init(orrery::Config{.address = "10.0.0.1:6380"}).
//
// Precedence, lowest first: defaults, environment (ORRERY_*), command-line flags
// (--orrery-*), fields set in code.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "orrery/runtime_env.h"

namespace orrery {

using Resources = std::map<std::string, double>;
using Labels = std::map<std::string, std::string>;

struct Config {
  // Head address "host:port". Empty: the embedded default (a head and a node in this
  // process). Env ORRERY_ADDRESS, flag --orrery-address.
  std::string address;
  // Redis "host:port" for the state store; empty: in memory (embedded only).
  // Env ORRERY_REDIS_ADDRESS, flag --orrery-redis-address.
  std::string redis_address;
  // Namespace for named actors. Env ORRERY_NAMESPACE, flag --orrery-namespace.
  std::string namespace_;
  // CPUs the embedded node offers; -1: the machine's core count. Env ORRERY_NUM_CPUS.
  int num_cpus = -1;
  // Extra resources the embedded node offers (merged over the detected ones).
  Resources resources;
  // Labels of the embedded node.
  Labels labels;
  // trace, debug, info, warn, error, off. Env ORRERY_LOG_LEVEL, flag --orrery-log-level.
  std::string log_level;
  // How long a demand that no node can ever hold waits before InfeasibleError; -1 forever.
  double infeasible_timeout_s = 5.0;
  // Directory for this session's logs and sockets; empty: /tmp/orrery/session_<time>_<pid>.
  std::string session_dir;
  // Maximum size of one message accepted from a peer, in bytes.
  long long max_message_bytes = 512ll << 20;
  // How long an idle task worker lease is kept before it is returned, in milliseconds.
  int task_lease_idle_ms = 100;
  // Host address to bind and advertise (embedded default: 127.0.0.1).
  std::string node_ip;
  // The embedded node's memory monitor: above this fraction of the host's (or its cgroup's)
  // memory in use, the node kills a worker (retriable and newest first) and its caller gets
  // OutOfMemoryError. 0 < t <= 1. Env ORRERY_MEMORY_USAGE_THRESHOLD, flag
  // --orrery-memory-usage-threshold.
  double memory_usage_threshold = 0.95;
  // How often the embedded node's memory monitor reads memory, in milliseconds; 0 turns it
  // off. Env ORRERY_MEMORY_MONITOR_REFRESH_MS, flag --orrery-memory-monitor-refresh-ms.
  int memory_monitor_refresh_ms = 250;
  // The embedded node's prestarted workers (docs/architecture.md "Prestarted workers"): at
  // most this many started workers without an assignment are kept per executable, as many as
  // were asked for between two of the node's ticks, so a burst of actors or leases takes
  // them instead of forking; 0: every worker is forked when asked for. Env
  // ORRERY_PRESTARTED_WORKERS, flag --orrery-prestarted-workers.
  int prestarted_workers = 16;
  // The cluster token (docs/security.md): a file holding the secret every process of the
  // cluster presents. Empty: on the head's host, the token of this host's session whose
  // head is `address` (`orrery start --head` writes <session dir>/token); the embedded
  // default makes its own. Env ORRERY_TOKEN_FILE, flag --orrery-token-file.
  std::string token_file;
  // Turns authentication and encryption off (every ZeroMQ connection in the clear, as a
  // cluster started with `orrery start --insecure` expects). Env ORRERY_INSECURE=1, flag
  // --orrery-insecure.
  bool insecure = false;
  // The embedded node's shared-memory object store (docs/objects.md): values whose packed
  // size is above 100 KiB are written there once and read in place by every process of the
  // node. Its capacity in bytes; 0: 30% of the host's (or its cgroup's) memory, as in Ray.
  // Env ORRERY_OBJECT_STORE_MEMORY, flag --orrery-object-store-memory (bytes, or with a
  // K, M or G suffix: 2G).
  long long object_store_memory = 0;
  // Where the embedded node spills objects not in use when its store is full; the node makes
  // a directory of its own inside and removes it when it stops. Empty: <session dir>/spill.
  // Env ORRERY_OBJECT_SPILL_DIR, flag --orrery-object-spill-dir.
  std::string object_spill_dir;
  // Whether the stdout and stderr lines of this job's workers are printed here, each with
  // its source as a prefix: "(Counter pid=4242, node=ab12cd) ..." (docs/logs.md). Env
  // ORRERY_LOG_TO_DRIVER=0, flag --orrery-log-to-driver=0 turn it off.
  bool log_to_driver = true;
  // The runtime env of this job's tasks and actors that set none themselves (docs/api.md
  // "Runtime environments"). Set in code only.
  RuntimeEnv runtime_env;
};

// Parses a size in bytes: digits with an optional K, M, G or T suffix (powers of 1024).
// Throws ConfigError naming `what` on anything else.
long long ParseByteSize(const std::string& what, const std::string& value);

// Throws ConfigError naming the first malformed field (an address that is not host:port, an
// unknown log level, ...).
void ValidateConfig(const Config& config);

// Applies ORRERY_* environment variables over `base` where `base` left a field unset.
// Throws ConfigError on malformed values.
Config ApplyEnvironment(Config base);

// Consumes --orrery-* flags from argv (removing them, updating argc) and applies them.
// Throws ConfigError on unknown --orrery-* flags or malformed values.
Config ApplyFlags(Config base, int* argc, char** argv);

}  // namespace orrery
