// `orrery dashboard` (foreground) and the dashboard daemon that `orrery start --head`
// adds to its session (docs/dashboard.md).
#pragma once

#include <string>

#include "cli/src/session.h"

namespace CLI {
class App;
}  // namespace CLI

namespace orrery::cli {

struct DashboardFlags {
  std::string redis_address;        // "" -> this host's latest head session's Redis
  std::string redis_password_file;  // "" -> RedisPasswordFor's defaults
  std::string host = "127.0.0.1";
  int port = 8265;
  // The cluster token, required when `host` is not a loopback address: --token-file, else
  // $ORRERY_TOKEN_FILE, else the token of this host's session whose Redis is served.
  std::string token_file;
  bool insecure = false;  // serve a non-loopback host without authentication (warns)
  // Connections one client address may hold (docs/dashboard.md "Slow clients"); more for a
  // dashboard behind a reverse proxy, whose requests all come from one address.
  int max_connections_per_address = 32;
  // Where the daemon writes the URL to open (with its one-time ticket), mode 0600, once it
  // serves; "" prints it instead.
  std::string url_file;
  // Written once the dashboard serves (after url_file): docs/cli.md "Readiness files".
  std::string ready_file;
};

// Adds `orrery dashboard` and its flags (filling `flags`) to `app`.
CLI::App* AddDashboardCommand(CLI::App& app, DashboardFlags* flags);

// Serves until SIGINT or SIGTERM; prints "Dashboard at http://HOST:PORT" once listening
// and, when the dashboard requires the token, a one-time login URL
// (http://HOST:PORT/login?ticket=...). Returns 1 when there is no Redis to read, no token
// for a non-loopback host, or the port cannot be bound.
int RunDashboard(DashboardFlags flags);

// Starts `orrery dashboard` as a daemon of `session` (logs/dashboard.log) bound to `host`,
// with the session's token file (or --insecure for an insecure session), and waits until it
// serves (its readiness file, <session dir>/dashboard.ready). Returns the URL to open (a one-time
// login URL when the dashboard requires the token) and records its pid in the session; on failure
// (port in use, ...) returns the reason as a non-OK status and leaves nothing running.
Result<std::string> StartDashboardDaemon(Session& session, const std::string& redis_address,
                                         const std::string& host, int port);

}  // namespace orrery::cli
