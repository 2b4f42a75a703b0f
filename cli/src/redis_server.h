// The redis-server that `orrery start --head` starts for its session (docs/cli.md).
#pragma once

#include <string>

#include "cli/src/session.h"
#include "orrery/status.h"

namespace orrery::cli {

// Starts redis-server for `session` on a loopback port, configured by <session dir>/redis.conf
// (0600: it holds `password`, which therefore never appears on a command line), and waits
// until it answers PING as the process started here. Redis cannot report a port it chose
// itself, so a port is chosen here; when another process takes it first (redis-server exits),
// another one is tried, a few times. Records the pid in the session; returns "127.0.0.1:PORT".
Result<std::string> StartSessionRedis(Session& session, const std::string& password);

// Whether the Redis at 127.0.0.1:`port` serves as the process `pid`: it answers PING with
// PONG after AUTH `password` ("" for none), and INFO names `pid` as its process_id (another
// process that holds the port is not it).
bool RedisServes(int port, const std::string& password, int pid);

}  // namespace orrery::cli
