// Whether a process exists, asked of the kernel by its pid.
#pragma once

#include <signal.h>

#include <cerrno>

namespace orrery {

// Whether process `pid` exists: signal 0 reaches it, or it runs as another user (EPERM).
// False for pid <= 0. A pid is reused once its process is reaped, and a process of another
// pid namespace looks gone: callers that remove what a gone process left also check its age
// or a lock.
inline bool ProcessExists(long pid) {
  return pid > 0 && (kill(pid_t(pid), 0) == 0 || errno == EPERM);
}

}  // namespace orrery
