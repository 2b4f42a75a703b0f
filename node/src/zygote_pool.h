// The node's zygotes: one per executable file, started on first use, replaced when the
// file at its path changes, and forgotten when it dies.
//
// A zygote is keyed by its executable's path and that file's identity (device, inode,
// size, modification time): a driver rebuilt at the same path gets a new zygote that runs
// the new code, while the old one lives on (retired, taking no new requests) until its
// last worker ends. When a zygote dies (its socket reaches EOF), its socket leaves the poll
// set, its queued and unanswered spawn requests fail, and its workers, which die with it
// (PR_SET_PDEATHSIG), are reported as exited; the next request starts a new one.
//
// The pool owns one epoll descriptor that the node's inbox polls (fd()); OnReady() does
// the I/O. Not thread-safe: used only from the node's inbox thread, which is also the
// thread the zygotes die with.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "node/internal/zygote.h"
#include "node/src/worker_processes.h"
#include "orrery/status.h"

namespace orrery::node {

// What makes an executable file this build and no other.
struct ExecutableIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  long long mtime_ns = 0;
  bool operator==(const ExecutableIdentity& o) const {
    return device == o.device && inode == o.inode && size == o.size && mtime_ns == o.mtime_ns;
  }
  bool operator!=(const ExecutableIdentity& o) const { return !(*this == o); }
};
// NotFound when there is no such file.
Result<ExecutableIdentity> IdentityOf(const std::string& path);

class ZygotePool final : public WorkerProcesses {
 public:
  // `env`: added to the zygotes' environment (and so to their workers'). Its
  // ORRERY_CGROUP_DIR, when set, is the node's cgroup subtree (process_cgroup.h): each
  // zygote's workers then run in cgroups of their own under zygote-<n> there.
  ZygotePool(std::map<std::string, std::string> env, ZygoteEvents events);
  ~ZygotePool();
  ZygotePool(const ZygotePool&) = delete;
  ZygotePool& operator=(const ZygotePool&) = delete;

  // The descriptor to poll for readability; OnReady() when it is.
  int fd() const override { return epoll_fd_; }
  void OnReady() override;

  // Starts the zygote for argv[0] unless a current one runs.
  Status Prepare(const std::vector<std::string>& argv) override;
  // Asks the zygote for argv[0] (started or replaced as needed) for a worker; the answer
  // comes through the events. An error means the request was not taken.
  Status Spawn(const std::vector<std::string>& argv, uint64_t request_id,
               const std::map<std::string, std::string>& env) override;
  void Kill(int pid) override;
  // Kills every zygote and with them their workers.
  // Kills every zygote, and so their workers, and waits until those have ended (at most
  // kStopWaitS).
  void StopAll() override;
  static constexpr double kStopWaitS = 2.0;

  // For tests and status: the pid of the current zygote for `path`, 0 when none.
  int ZygotePid(const std::string& path) const;

 private:
  struct Entry {
    uint64_t id = 0;
    std::string path;
    ExecutableIdentity identity;
    std::unique_ptr<ZygoteClient> client;
    bool retired = false;
    bool polling_write = false;
    std::string cgroup;  // its workers' cgroups are made here; empty without cgroups
    std::string output;  // where its stdout and stderr go (.out, .err); empty: the node's
  };

  Result<Entry*> Current(const std::vector<std::string>& argv);
  void Watch(Entry& e);
  void OnEvent(Entry& e, uint32_t events);
  // Forgets a dead zygote: fails its requests and reports its workers as exited.
  void Died(Entry* e);
  void DropIfDone(Entry* e);
  void Remove(Entry* e);
  // The cgroup for zygote `id`'s workers, under ORRERY_CGROUP_DIR of `env`; empty when none.
  std::string MakeCgroup(uint64_t id);
  // Kills what is left in a zygote's cgroup and removes it.
  void EndCgroup(const std::string& dir);

  std::map<std::string, std::string> env_;
  ZygoteEvents events_;
  int epoll_fd_ = -1;
  uint64_t next_id_ = 1;
  std::map<std::string, uint64_t> current_;             // by path
  std::map<uint64_t, std::unique_ptr<Entry>> entries_;  // current and retired, by id
};

}  // namespace orrery::node
