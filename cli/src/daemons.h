// The head and node daemons that `orrery start` launches (`orrery head ...`,
// `orrery node ...`). Each runs until SIGTERM or SIGINT; given --ready-file, each writes it
// once it serves (cli/src/ready_file.h, docs/cli.md "Readiness files").
#pragma once

#include <string>

#include "cli/src/resource_flags.h"
#include "orrery/config.h"
#include "orrery/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace orrery::cli {

// How a daemon authenticates (docs/security.md): the cluster token file (else
// ORRERY_TOKEN_FILE), or none at all with `insecure`.
struct CredentialFlags {
  std::string token_file;
  bool insecure = false;
};

struct HeadFlags {
  CredentialFlags credentials;
  std::string bind = "127.0.0.1";
  std::string advertise;  // "" -> the bind address (127.0.0.1 for 0.0.0.0)
  int port = 6380;
  std::string redis_address;
  std::string redis_password_file;  // "" -> $ORRERY_REDIS_PASSWORD_FILE, else no password
  double health_period_s = 1.0;
  int health_threshold = 30;       // HeadOptions: 30 s of silence before a node is dead
  std::string ready_file;          // "" -> none
  std::string history_ttl = "7d";  // a duration (cli/src/duration.h); "0": keep for ever
  int metrics_port = 0;            // GET /metrics (docs/metrics.md): -1 none, 0 any free port
};

struct NodeFlags {
  CredentialFlags credentials;
  std::string address;  // head host:port
  std::string bind = "127.0.0.1";
  std::string advertise;  // "" -> the bind address (127.0.0.1 for 0.0.0.0); also its workers'
  int num_cpus = -1;
  double memory = -1;
  Resources resources;
  Labels labels;
  double heartbeat_s = 1.0;
  double memory_usage_threshold = 0.95;
  int memory_monitor_refresh_ms = 250;
  int prestarted_workers = 16;
  uint64_t object_store_memory = 0;  // 0: 30% of memory
  std::string object_spill_dir;
  std::string log_dir;            // "": the node's default (docs/logs.md)
  uint64_t log_rotate_bytes = 0;  // 0: the node's default
  int log_rotate_backups = -1;    // -1: the node's default
  int metrics_port = 0;           // as the head's
  std::string ready_file;         // "" -> none; the file adds "node_id"
};

// Sets this process's credentials from `flags` (the head's address lets a node on the head's
// host find the session's token); returns the token file used, "" when insecure. Prints
// the reason and returns an error when there is no usable token.
Result<std::string> UseDaemonCredentials(const CredentialFlags& flags,
                                         const std::string& head_address);

int RunHead(const HeadFlags& flags);
int RunNode(const NodeFlags& flags);

// Adds --advertise-address (validated: cli/src/daemons.cc) filling `advertise` to `app`.
void AddAdvertiseFlag(CLI::App* app, std::string* advertise);

// Adds --token-file and --insecure to a daemon or inspection subcommand.
void AddCredentialFlags(CLI::App* app, CredentialFlags* flags);

// The `orrery head` and `orrery node` subcommands and the flags they fill.
struct DaemonCommands {
  CLI::App* head = nullptr;
  CLI::App* node = nullptr;
  HeadFlags head_flags;
  NodeFlags node_flags;
  ResourceFlags node_resources;  // parsed into node_flags by RunNodeCommand
};
void AddDaemonCommands(CLI::App& app, DaemonCommands* commands);
// Runs `orrery node` with the flags parsed; throws orrery::ConfigError on malformed ones.
int RunNodeCommand(DaemonCommands& commands);

}  // namespace orrery::cli
