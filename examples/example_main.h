// What the examples share: a line per check, and the end of main() (run, report any
// unexpected orrery::Error, Shutdown, say whether all went well).
#pragma once

#include <cstdio>
#include <string>

#include "orrery/orrery.h"

namespace orrery_examples {

// Prints "  ok   what" or "  FAIL what"; returns ok.
inline bool Check(bool ok, const std::string& what) {
  std::printf("  %s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  return ok;
}

// Runs `run` (after orrery::Init), shuts the runtime down and returns main()'s exit status.
inline int RunThenShutdown(const char* name, bool (*run)()) {
  bool ok = false;
  try {
    ok = run();
  } catch (const orrery::Error& e) {
    std::printf("unexpected %s: %s\n", e.kind(), e.what());
  }
  orrery::Shutdown();
  std::printf("%s: %s\n", name, ok ? "all good" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace orrery_examples
