// Whether a process exists, asked of the kernel by its pid, and removing the folders that
// processes which ended left behind.
#pragma once

#include <signal.h>

#include <cerrno>
#include <functional>
#include <string>
#include <string_view>

namespace orrery {

// Whether process `pid` exists: signal 0 reaches it, or it runs as another user (EPERM).
// False for pid <= 0. A pid is reused once its process is reaped, and a process of another
// pid namespace looks gone: callers that remove what a gone process left also check its age
// or a lock.
inline bool ProcessExists(long pid) {
  return pid > 0 && (kill(pid_t(pid), 0) == 0 || errno == EPERM);
}

// The number written in `digits` when it is 1 to 9 decimal digits and nothing else, else 0:
// the pid in a folder's name.
inline long PidFromDigits(std::string_view digits) {
  if (digits.empty() || digits.size() > 9) return 0;
  long pid = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return 0;
    pid = pid * 10 + (c - '0');
  }
  return pid;
}

// Removes the folders in `parent` that processes which ended left behind: those of this user
// whose name `pid_of` maps to a pid (> 0) of no running process, untouched for `min_age_s`
// (a process of another pid namespace sharing `parent` looks gone until then). Everything
// else is kept; a folder that cannot be removed is logged. Returns how many were removed.
int RemoveFoldersOfEndedProcesses(const std::string& parent,
                                  const std::function<long(const std::string& name)>& pid_of,
                                  double min_age_s);

}  // namespace orrery
