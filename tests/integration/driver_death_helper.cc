// A small driver for DriverDeathTest: starts the embedded cluster, creates two actors and
// runs a task, prints the pids of their worker processes as "PIDS <pid> <pid> <pid>" and
// then blocks until it is killed. Its workers re-run this executable, so Init() comes first.
#include <unistd.h>

#include <cstdio>
#include <exception>

#include "orrery/orrery.h"

namespace {

class PidActor {
 public:
  static PidActor* Create() { return new PidActor(); }
  int Pid() { return int(getpid()); }
};

int TaskPid() { return int(getpid()); }

}  // namespace

ORRERY_REMOTE(PidActor::Create, &PidActor::Pid, TaskPid);

int main(int argc, char** argv) {
  orrery::Config config;
  config.num_cpus = 8;  // independent of the test machine's core count
  orrery::Init(config, argc, argv);
  try {
    auto a = orrery::Actor(PidActor::Create).Remote();
    auto b = orrery::Actor(PidActor::Create).Remote();
    int pa = *orrery::Get(a.Task(&PidActor::Pid).Remote(), 60000);
    int pb = *orrery::Get(b.Task(&PidActor::Pid).Remote(), 60000);
    int pt = *orrery::Get(orrery::Task(TaskPid).Remote(), 60000);
    std::printf("PIDS %d %d %d\n", pa, pb, pt);
    std::fflush(stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "driver_death_helper: %s\n", e.what());
    return 1;
  }
  while (true) pause();
}
