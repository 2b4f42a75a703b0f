// `orrery dashboard` (foreground) and the dashboard daemon that `orrery start --head`
// adds to its session (docs/dashboard.md).
#pragma once

#include <string>

#include "cli/src/session.h"

namespace orrery::cli {

struct DashboardFlags {
  std::string redis_address;  // "" -> this host's latest head session's Redis
  std::string redis_password_file;  // "" -> RedisPasswordFor's defaults
  std::string host = "127.0.0.1";
  int port = 8265;
};

// Serves until SIGINT or SIGTERM; prints "Dashboard at http://HOST:PORT" once listening.
// Returns 1 when there is no Redis to read or the port cannot be bound.
int RunDashboard(DashboardFlags flags);

// Starts `orrery dashboard` as a daemon of `session` (logs/dashboard.log) and waits until
// it serves. Returns its URL and records its pid in the session; on failure (port in use,
// ...) returns the reason as a non-OK status and leaves nothing running.
Result<std::string> StartDashboardDaemon(Session& session, const std::string& redis_address,
                                         int port);

}  // namespace orrery::cli
