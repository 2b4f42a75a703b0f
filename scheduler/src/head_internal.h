// Helpers shared by the files that implement HeadService (head_*.cc); not for other code.
#pragma once

#include <stdexcept>
#include <string>

#include "core/src/clock.h"
#include "orrery/ids.h"

namespace orrery::scheduler {

// Drivers heartbeat every second; a driver silent this long is gone.
inline constexpr double kJobTimeoutS = 5.0;
// ActorOptionsMsg::lifetime of a detached actor.
inline constexpr int kDetachedLifetime = 1;

inline double Now() { return MonotonicSeconds(); }
inline std::string Hex(const std::string& binary_id) {
  return UniqueId::FromBinary(binary_id).Hex();
}

}  // namespace orrery::scheduler

// Decodes or throws (the inbox answers a thrown error with kError and keeps serving).
#define DECODE_OR_THROW(env, msg)                         \
  do {                                                    \
    Status s_ = (env).Decode(&(msg));                     \
    if (!s_.ok()) throw std::runtime_error(s_.message()); \
  } while (0)
