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

#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "orrery/status.h"

namespace orrery::node {

// The folder a worker's stdout and stderr go to (worker-<pid>.out, .err), in a spawn
// request's environment; in the zygotes' too, where theirs go (zygote-<n>.out, .err).
inline constexpr char kWorkerLogDirEnv[] = "ORRERY_WORKER_LOG_DIR";

// Entry point of a worker process after fork (never returns).
using WorkerEntry = void (*)();

// In the zygote process: serves spawn requests on `fd` until the node goes away.
[[noreturn]] void ZygoteMain(int fd, WorkerEntry entry);

// The node's side of one zygote. Not thread-safe: the node uses it from its inbox thread.
class ZygoteClient {
 public:
  // Spawn requests queued past this many are refused (the zygote forks them one by one).
  static constexpr size_t kMaxQueuedSpawns = 20000;

  ZygoteClient() = default;
  ~ZygoteClient();
  // Starts the zygote: the executable argv[0] (an absolute path) with `argv`. Its stdout and
  // stderr go to `output_stem`.out and .err when given (what the driver's main() prints
  // before it reaches Init() in the zygote then stays out of the driver's terminal), and are
  // the node's own otherwise.
  Status Start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
               const std::string& output_stem = "");
  // Asks for a worker with extra environment variables; the pid comes back via OnReadable.
  // The request is queued and written as the socket takes it (Flush): the socket holds
  // only a few hundred requests. Unavailable when the queue is full or the zygote is gone.
  Status Spawn(uint64_t request_id, const std::map<std::string, std::string>& env);
  // Writes queued requests until the socket is full. Unavailable when the zygote is gone.
  Status Flush();
  // Whether requests wait for room in the socket (the caller polls for writability).
  bool wants_write() const { return !queue_.empty(); }
  int fd() const { return fd_; }
  // Reads what the zygote sent: spawned(request_id, pid) and exited(pid, description).
  // Returns false once the zygote has closed its end (it is gone).
  bool OnReadable(const std::function<void(uint64_t, int)>& spawned,
                  const std::function<void(int, const std::string&)>& exited);
  // Requests sent or queued that have no spawned() answer yet, and the workers alive: what
  // the zygote's death takes with it.
  const std::set<uint64_t>& unanswered() const { return unanswered_; }
  const std::set<int>& children() const { return children_; }
  // Kills the zygote (and, through PR_SET_PDEATHSIG, every worker) and reaps it. Returns
  // how it ended ("was killed by signal 9 (Killed)"), empty if it was not running.
  std::string Stop();
  int pid() const { return pid_; }

 private:
  int fd_ = -1;
  int pid_ = -1;
  std::deque<std::string> queue_;  // packed requests not yet written
  std::set<uint64_t> unanswered_;
  std::set<int> children_;
};

}  // namespace orrery::node
