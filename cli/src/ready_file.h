// The readiness file of a daemon (docs/cli.md "Readiness files"): once a daemon that was
// given `--ready-file PATH` is bound and serving, it writes PATH (a temporary file renamed
// into place, so a reader sees all of it or nothing) holding one JSON object
//   {"pid": 1234, "address": "127.0.0.1:6380", "port": 6380}
// (a node adds "node_id"). Whoever started the daemon waits for that file instead of reading
// its log, and learns the port actually bound (a daemon given port 0 binds an ephemeral one).
#pragma once

#include <map>
#include <string>

#include "orrery/status.h"

namespace orrery::cli {

struct ReadyInfo {
  int pid = 0;
  std::string address;  // host:port, where others connect
  int port = 0;
  std::map<std::string, std::string> extra;  // further string fields (a node's "node_id")
};

// Writes `path` for this process (mode 0600, atomically). `address` may carry a scheme
// ("tcp://host:port"): the file holds host:port.
Status WriteReadyFile(const std::string& path, const std::string& address, int port,
                      const std::map<std::string, std::string>& extra = {});

// Parses a readiness file's content; InvalidArgument when it is not one.
Result<ReadyInfo> ParseReadyFile(const std::string& text);

// Waits until the daemon `pid` (a child of this process; `what` names it in errors, e.g.
// "the head") writes its readiness file `path`, at most `timeout_ms`. When the daemon exits
// first, or the file names another pid, returns Unavailable with the last lines of its `log`;
// Timeout when the deadline passes (the daemon is left running: the caller stops it).
Result<ReadyInfo> WaitForReadyFile(const std::string& path, int pid, const std::string& log,
                                   const std::string& what, int timeout_ms = 15000);

// The last `lines` lines of the file `log`, each indented by two spaces ("" when empty).
std::string LogTail(const std::string& log, int lines = 10);

}  // namespace orrery::cli
