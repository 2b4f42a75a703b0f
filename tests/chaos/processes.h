// What the chaos test reads from /proc and /dev/shm: the processes a test cluster started
// (found by a marker in their environment, which every process they fork inherits), their
// descriptor counts, and shared-memory segments.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace orrery_chaos {

// The part a process plays in the cluster, from its command line and environment.
enum class Role { kRedis, kHead, kNode, kZygote, kWorker, kOther };
const char* RoleName(Role role);

struct Proc {
  int pid = 0;
  int ppid = 0;
  Role role = Role::kOther;
  std::string cmdline;  // argv joined by spaces
};

// Every live process (not a zombie, not this one) whose initial environment contains the
// entry `marker` ("NAME=value"), or whose working directory is `cwd` when given (redis-server
// writes its title over its environment, and runs in its --dir). A zygote and the workers it
// forks share the zygote's environment (ORRERY_ROLE=zygote); a worker is such a process
// whose parent is one too.
std::vector<Proc> MarkedProcesses(const std::string& marker, const std::string& cwd = "");

// Whether `pid` is `ancestor` or descends from it (by the parent chain in /proc).
bool DescendsFrom(int pid, int ancestor);

// Open descriptors of `pid`; -1 when it cannot be read (gone).
int CountFds(int pid);

// Names of the entries in /dev/shm.
std::set<std::string> ShmEntries();

// One line per process: "pid (ppid) role: cmdline".
std::string Describe(const std::vector<Proc>& procs);

}  // namespace orrery_chaos
