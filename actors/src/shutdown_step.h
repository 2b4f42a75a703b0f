// One step of orrery::Shutdown (actors/src/api.cc): a step that fails (the head gone, say)
// must neither stop the steps after it nor escape Shutdown, which also runs from atexit; its
// failure is logged at warn, naming the step, so that it is not lost.
#pragma once

#include <exception>
#include <functional>
#include <string>

#include "core/internal/log.h"

namespace orrery::runtime {

inline void ShutdownStep(const char* what, const std::function<void()>& run) noexcept {
  try {
    run();
  } catch (const std::exception& e) {
    LOG_WARN(std::string("Shutdown: ") + what + " failed: " + e.what());
  } catch (...) {
    LOG_WARN(std::string("Shutdown: ") + what + " failed with a non-standard exception");
  }
}

}  // namespace orrery::runtime
