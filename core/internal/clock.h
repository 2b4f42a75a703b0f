// Seconds as doubles: the monotonic clock for deadlines and intervals, the wall clock for
// times that are stored or shown (seconds since the Unix epoch).
#pragma once

#include <chrono>

namespace orrery {

inline double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace orrery
