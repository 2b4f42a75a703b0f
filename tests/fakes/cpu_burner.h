// A busy machine for tests: one child process per online core, each spinning until the
// burner is destroyed (it kills and reaps them; a child also dies with this process).
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace orrery::testing {

class CpuBurner {
 public:
  CpuBurner() {
    long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
    for (long i = 0; i < cores; ++i) {
      pid_t pid = fork();
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (uint64_t n = 0;; ++n) asm volatile("" : "+r"(n));  // spin; kept by the compiler
      }
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~CpuBurner() {
    for (pid_t pid : pids_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  CpuBurner(const CpuBurner&) = delete;
  CpuBurner& operator=(const CpuBurner&) = delete;

  size_t size() const { return pids_.size(); }

 private:
  std::vector<pid_t> pids_;
};

}  // namespace orrery::testing
