// `orrery start` (docs/cli.md): a head (--head: Redis unless --redis-address, a head, a node
// and the dashboard) or a node joining one (--address), as daemons of a new session.
#pragma once

#include <string>

#include "cli/src/daemons.h"
#include "cli/src/resource_flags.h"

namespace CLI {
class App;
}  // namespace CLI

namespace orrery::cli {

struct StartFlags {
  bool head_mode = false;
  std::string join_address;  // --address
  int port = 6380;           // the head's; 0: any free port
  std::string bind = "127.0.0.1";
  std::string advertise;      // --advertise-address: "" -> the bind address
  std::string redis_address;  // "" -> start redis-server here
  std::string redis_password_file;
  bool block = false;
  bool no_dashboard = false;
  int dashboard_port = 8265;
  std::string dashboard_host = "127.0.0.1";
  ResourceFlags resources;
  CredentialFlags credentials;
  bool insecure_allow_remote = false;
  std::string history_ttl = "7d";  // passed to the head (cli/src/duration.h)
  // GET /metrics of the head (--head) or of the node (--address): -1 none, 0 any free port.
  // The node that --head starts beside the head takes any free port (none when -1).
  int metrics_port = 0;
};

// Adds `orrery start` and its flags (filling `flags`) to `app`.
CLI::App* AddStartCommand(CLI::App& app, StartFlags* flags);

// Starts what `flags` asks for and waits until each daemon is ready (its readiness file);
// on failure stops what it started. Returns the exit code: 0, 1 (a daemon did not start),
// 2 (contradictory or malformed flags). With --block, returns once stopped.
// Throws orrery::ConfigError on malformed resource flags.
int RunStart(StartFlags flags);

}  // namespace orrery::cli
