#include "core/internal/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>

namespace orrery::log {

namespace {
std::atomic<int> g_level{int(Level::kWarn)};

spdlog::logger& Logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::stderr_color_mt("orrery");
    l->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%^%l%$] %v");
    l->set_level(spdlog::level::trace);
    return l;
  }();
  return *logger;
}

spdlog::level::level_enum ToSpd(Level l) {
  switch (l) {
    case Level::kTrace:
      return spdlog::level::trace;
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
    case Level::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}
}  // namespace

void SetLevel(const std::string& level) {
  static const std::pair<const char*, Level> kNames[] = {
      {"trace", Level::kTrace}, {"debug", Level::kDebug}, {"info", Level::kInfo},
      {"warn", Level::kWarn},   {"error", Level::kError}, {"off", Level::kOff}};
  for (const auto& [name, l] : kNames)
    if (level == name) g_level = int(l);
}

bool Enabled(Level level) { return int(level) >= g_level.load(std::memory_order_relaxed); }

void Write(Level level, const std::string& message) { Logger().log(ToSpd(level), message); }

void SetProcessTag(const std::string& tag) {
  Logger().set_pattern("[%Y-%m-%d %H:%M:%S.%e] [orrery " + tag + "] [%^%l%$] %v");
}

}  // namespace orrery::log
