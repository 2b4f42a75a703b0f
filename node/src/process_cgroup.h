// Cgroup v2 groups for the node's jobs and workers (docs/architecture.md "Processes a job or
// worker leaves behind"): every job driver and every worker runs in a cgroup of its own, so
// that ending it kills every process it started, those in a new session (setsid) or process
// group included. The node's subtree is <cgroup2 mount><the node's own cgroup>/orrery-node-
// <pid>: job-<submission id> for jobs, zygote-<n>/worker-<pid> for workers.
//
// Where cgroup v2 is not mounted or not writable, or ORRERY_NO_CGROUPS=1, CgroupTree::Create
// answers null and the callers fall back to what they can do without (process groups, and a
// subreaper in the zygote).
//
// The free functions take a cgroup directory; EnterCgroup is async-signal-safe (for a child
// between fork and exec). Not thread-safe otherwise; no exceptions.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace orrery::node {

// The directory of this process's own cgroup in a writable cgroup v2 hierarchy, empty when
// there is none (or ORRERY_NO_CGROUPS=1).
std::string OwnCgroupDir();

// Opens <dir>/cgroup.procs for writing (close-on-exec); -1 on failure.
int OpenCgroupProcs(const std::string& dir);
// Moves the calling process into the cgroup whose cgroup.procs `procs_fd` is. Async-signal-safe.
bool EnterCgroup(int procs_fd);
// Sends SIGKILL to every process in `dir` and below (cgroup.kill where the kernel has it, else
// each pid in cgroup.procs, over and over until none is left or a bound is reached).
void KillCgroup(const std::string& dir);
// Waits up to `timeout_ms` for `dir` and its descendants to hold no process (cgroup.events).
bool WaitCgroupEmpty(const std::string& dir, int timeout_ms);
// Removes `dir` and the cgroups below it, deepest first; false when one still holds a
// process (or `dir` cannot be removed). A missing `dir` counts as removed.
bool RemoveCgroup(const std::string& dir);

// Without cgroups: whether an entry ("NAME=value") of process `pid`'s environment matches
// (false when it cannot be read), and the processes other than this one whose environment
// holds `var` exactly (of those this process may read). A job's driver carries
// ORRERY_SUBMISSION_ID and a worker ORRERY_WORKER_ID, and so does what they start with exec,
// in a new session or not. A process caught in an exec shows no environment for a moment:
// ProcessesWithEnv reads such processes again, for up to about 50 ms.
bool AnyEnvironEntry(int pid, const std::function<bool(const std::string&)>& match);
std::vector<int> ProcessesWithEnv(const std::string& var);

// The node's subtree. Owns it: the destructor kills what is left in it and removes it.
class CgroupTree {
 public:
  // Null where cgroups cannot be used. Removes what nodes that died left (orrery-node-<pid>
  // beside this one, whose pid is gone).
  static std::unique_ptr<CgroupTree> Create();
  ~CgroupTree();
  CgroupTree(const CgroupTree&) = delete;
  CgroupTree& operator=(const CgroupTree&) = delete;

  const std::string& path() const { return path_; }
  // Makes the cgroup `name` in the subtree; its directory, empty on failure.
  std::string Make(const std::string& name);
  // Kills everything in `name` and removes it, now or, when its processes have not exited
  // yet, on a later Sweep().
  void End(const std::string& name);
  // Removes the ended cgroups whose processes have all exited since.
  void Sweep();

 private:
  explicit CgroupTree(std::string path) : path_(std::move(path)) {}
  std::string path_;
  std::set<std::string> ending_;
};

}  // namespace orrery::node
