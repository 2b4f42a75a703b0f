// Sessions of the `orrery` command: what `orrery start` launched on this host (pids, the
// head and Redis addresses, log files), kept in a directory so `orrery stop` and
// `orrery status` find them, under SessionRoot() (core/internal/session_dir.h).
//
// Which session later commands pick (docs/cli.md "Which session a command uses"): only a
// started one, whose `orrery start` brought all its daemons up (values "started" = "1",
// written by PublishSession). Without an address, session_latest (the session started
// last); for a head address, the newest started session that records that head.
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
  bool started() const;  // PublishSession ran: later commands may pick it
};

// A new session directory, not yet picked by any command (not started, not session_latest).
Session NewSession();
// The session's daemons are all up: marks it started, saves it and points session_latest
// at it (atomically), so that later commands and drivers on this host pick it.
void PublishSession(Session& s);
// A session whose start failed: its processes are stopped by the caller; this removes its
// copy of the token (which may be the wrong one) so nothing can read it. Its logs stay.
void DiscardFailedSession(const Session& failed);
// Every session directory on this host that still has live processes (started or not:
// what `orrery stop` stops).
std::vector<Session> LiveSessions();
// The started sessions among LiveSessions(): those later commands may pick.
std::vector<Session> StartedSessions();
// The session session_latest points at: the one started last.
Result<Session> LatestSession();
// The password file (values "redis_password_file") of this host's started session, the
// latest one first, whose Redis is `redis_address`; "" when none.
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
// Stops `pids` (SIGTERM in reverse order, then SIGKILL for any still running after 5 s),
// reaping those that are children of this process.
void StopProcesses(const std::vector<int>& pids);
// The absolute path of this executable.
std::string SelfExe();

}  // namespace orrery::cli
