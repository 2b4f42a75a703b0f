// Orrery's logging: one thin wrapper over spdlog so no spdlog type leaks anywhere.
// Levels: info for lifecycle events a user wants to see, debug for per-message detail.
#pragma once

#include <string>

namespace orrery::log {

enum class Level { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// "info", "debug", ...; unknown names are ignored.
void SetLevel(const std::string& level);
bool Enabled(Level level);
void Write(Level level, const std::string& message);
// A tag printed in every line of this process (e.g. "head", "worker 1234").
void SetProcessTag(const std::string& tag);

}  // namespace orrery::log

#define ORRERY_LOG(level, expr)                                                \
  do {                                                                         \
    if (::orrery::log::Enabled(::orrery::log::Level::level)) {                 \
      ::orrery::log::Write(::orrery::log::Level::level, std::string() + expr); \
    }                                                                          \
  } while (0)
#define LOG_DEBUG(expr) ORRERY_LOG(kDebug, expr)
#define LOG_INFO(expr) ORRERY_LOG(kInfo, expr)
#define LOG_WARN(expr) ORRERY_LOG(kWarn, expr)
#define LOG_ERROR(expr) ORRERY_LOG(kError, expr)
