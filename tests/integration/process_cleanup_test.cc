// What a worker leaves behind dies with it (docs/architecture.md "Processes a job or worker
// leaves behind"): an actor whose worker starts a process in a new session (setsid) is
// killed, and that process goes too. Registered twice: with the node's cgroups (skipped
// where cgroup v2 cannot be written), and with ORRERY_NO_CGROUPS=1, where the zygote is a
// subreaper that kills the orphans of ended workers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "remote_functions.h"
#include "test_support.h"

namespace {

using orrery_test::kGetTimeoutMs;
using orrery_test::ProcessGone;
using orrery_test::WaitFor;

class Spawner {
 public:
  static Spawner* Create() { return new Spawner(); }
  // Starts a grandchild in a new session that writes its pid to `pidfile`; this worker's pid.
  int StartGrandchild(std::string pidfile) {
    std::string cmd =
        "setsid sh -c 'echo $$ > \"$1.tmp\"; mv \"$1.tmp\" \"$1\"; exec sleep 1000' sh '" +
        pidfile + "' </dev/null >/dev/null 2>&1 &";
    if (std::system(cmd.c_str()) != 0) return -1;
    return int(getpid());
  }
};

ORRERY_REMOTE(Spawner::Create, &Spawner::StartGrandchild);

bool CgroupsOff() {
  const char* off = std::getenv("ORRERY_NO_CGROUPS");
  return off && *off && std::string(off) != "0";
}

// The cgroup v2 path of `pid` (the "0::" line of /proc/<pid>/cgroup), empty when none.
std::string CgroupOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "";
}

// Where the cgroup v2 hierarchy is mounted, empty when it is not.
std::string Cgroup2Mount() {
  std::ifstream in("/proc/self/mounts");
  std::string dev, mount, type, rest;
  while (in >> dev >> mount >> type && std::getline(in, rest)) {
    if (type == "cgroup2") return mount;
  }
  return "";
}

TEST(ProcessCleanupTest, AGrandchildInANewSessionDiesWithItsKilledActor) {
  std::string pidfile = "/tmp/orrery-cleanup-" + std::to_string(getpid()) + ".pid";
  unlink(pidfile.c_str());
  orrery_test::ActorReaper reaper;
  auto actor = reaper.Add(orrery::Actor(Spawner::Create).Remote());
  int worker = *orrery::Get(actor.Task(&Spawner::StartGrandchild).Remote(pidfile), kGetTimeoutMs);
  ASSERT_GT(worker, 0);
  pid_t grandchild = -1;
  ASSERT_TRUE(WaitFor([&] { return bool(std::ifstream(pidfile) >> grandchild); }));
  unlink(pidfile.c_str());
  ASSERT_FALSE(ProcessGone(grandchild));
  std::string cgroup = CgroupOf(grandchild);
  bool own_cgroup = cgroup.find("/worker-" + std::to_string(worker)) != std::string::npos;
  if (!CgroupsOff() && !own_cgroup) {
    kill(grandchild, SIGKILL);
    GTEST_SKIP() << "no cgroup of its own for the worker (cgroup v2 not writable here?): "
                 << cgroup;
  }
  EXPECT_EQ(own_cgroup, !CgroupsOff()) << cgroup;
  actor.Kill();
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(worker); }));
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(grandchild); }))
      << "the grandchild " << grandchild << " outlived its worker " << worker;
  if (!ProcessGone(grandchild)) kill(grandchild, SIGKILL);
  if (own_cgroup) {
    std::string dir = Cgroup2Mount() + cgroup;
    EXPECT_TRUE(WaitFor([&] { return !std::filesystem::exists(dir); }))
        << "the worker's cgroup " << dir << " was not removed";
  }
}

}  // namespace
