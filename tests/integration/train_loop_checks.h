// Checks that train loops in the tests run on every worker: a failed one throws, so the
// run fails with the rank and what was wrong in its error.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "orrery/train/train.h"

namespace orrery_test {

[[noreturn]] inline void Fail(const orrery::train::Context& ctx, const std::string& what) {
  throw std::runtime_error("rank " + std::to_string(ctx.WorldRank()) + ": " + what);
}

inline void Expect(const orrery::train::Context& ctx, bool ok, const std::string& what) {
  if (!ok) Fail(ctx, what);
}

// The variable's value, or "<unset>".
inline std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "<unset>";
}

}  // namespace orrery_test
