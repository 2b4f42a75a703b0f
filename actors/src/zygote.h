// The fork server that starts worker processes quickly.
//
// The node starts the zygote once: the driver's own executable re-run with
// ORRERY_ROLE=zygote, which reaches orrery::Init() and enters ZygoteMain() instead of
// returning. The zygote is single-threaded and has no ZeroMQ context, so it can fork()
// safely; each child sets its environment, arranges to die with the zygote
// (PR_SET_PDEATHSIG), and becomes a worker. The zygote itself dies with the thread that
// started it, so no worker outlives its driver or node. Messages between the node and the
// zygote are msgpack over a SOCK_SEQPACKET socket pair.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "orrery/status.h"

namespace orrery::runtime {

// Entry point of a worker process after fork (never returns).
using WorkerEntry = void (*)();

// In the zygote process: serves spawn requests on `fd` until the node goes away.
[[noreturn]] void ZygoteMain(int fd, WorkerEntry entry);

// The node's side.
class ZygoteClient {
 public:
  ZygoteClient() = default;
  ~ZygoteClient();
  // Starts the zygote: the executable argv[0] (an absolute path) with `argv`.
  Status Start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);
  // Asks for a worker with extra environment variables; the pid comes back via OnReadable.
  Status Spawn(uint64_t request_id, const std::map<std::string, std::string>& env);
  int fd() const { return fd_; }
  // Reads what the zygote sent: spawned(request_id, pid) and exited(pid, description).
  void OnReadable(const std::function<void(uint64_t, int)>& spawned,
                  const std::function<void(int, const std::string&)>& exited);
  // Kills the zygote (and, through PR_SET_PDEATHSIG, every worker).
  void Stop();
  int pid() const { return pid_; }

 private:
  int fd_ = -1;
  int pid_ = -1;
};

}  // namespace orrery::runtime
