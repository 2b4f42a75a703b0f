// Sessions of the `orrery` command: what `orrery start` launched on this host (pids, the
// head and Redis addresses, log files), kept in a directory so `orrery stop` and
// `orrery status` find them, under SessionRoot() (core/internal/session_dir.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/internal/session_dir.h"
#include "orrery/status.h"

namespace orrery::cli {

struct Session {
  std::string dir;
  std::map<std::string, std::string> values;  // head_address, redis_address, ...
  std::vector<int> pids;                      // processes started here, in start order

  void Save() const;
};

Session NewSession();
// Every session directory on this host that still has live processes.
std::vector<Session> LiveSessions();
Result<Session> LatestSession();
// A session whose start failed stops being the latest: session_latest points again at the
// newest other session that knows its head (or nowhere), so that `orrery status` and
// drivers on this host keep finding the cluster that runs.
void ForgetFailedSession(const Session& failed);
// The password file (values "redis_password_file") of this host's session, the latest one
// first, whose Redis is `redis_address`; "" when none.
std::string SessionRedisPasswordFile(const std::string& redis_address);
// The password of the Redis at `redis_address` (docs/redis-schema.md "Password"): read from
// `file`, else from $ORRERY_REDIS_PASSWORD_FILE, else from SessionRedisPasswordFile; "" when
// none of them names a file. An unreadable or malformed file is an error naming it.
Result<std::string> RedisPasswordFor(const std::string& file, const std::string& redis_address);
// The pid of a live node daemon that a session on this host started for the head at
// `head_address` (values "head_address" and "node_pid"), or 0. A head restarted at the same
// address is joined again by that node: starting another one here would count this host
// twice.
int LiveNodeFor(const std::string& head_address);

// Starts `argv` detached (own session, output to `log`), returns its pid.
Result<int> SpawnDaemon(const std::vector<std::string>& argv, const std::string& log);
bool Alive(int pid);
// Stops `pids` (SIGTERM in reverse order, then SIGKILL for any still running after 5 s),
// reaping those that are children of this process.
void StopProcesses(const std::vector<int>& pids);
// The absolute path of this executable.
std::string SelfExe();

}  // namespace orrery::cli
