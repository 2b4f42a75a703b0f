// Durations on the command line (`--history-ttl 7d`, docs/cli.md): a whole number of seconds,
// or of minutes, hours or days with the suffix m, h or d (s for seconds is allowed too).
#pragma once

#include <string>
#include <string_view>

#include "orrery/status.h"

namespace orrery::cli {

// The longest duration accepted: 100 years, in seconds.
inline constexpr double kMaxDurationS = 100.0 * 365 * 86400;

// Seconds in `text` ("45", "45s", "30m", "12h", "7d"); InvalidArgument saying what is wrong
// for anything else (empty, a sign, a fraction, another suffix, more than 100 years).
Result<double> ParseDuration(std::string_view text);

inline constexpr const char* kHistoryTtlHelp =
    "the head deletes the records of ended actors, jobs, runs and dead nodes this long after "
    "they ended (7d, 12h, 30m, 45s or seconds; 0 keeps them; default 7d)";

// ParseDuration as a CLI11 check: "" when `text` is a duration, else the error.
std::string CheckDuration(const std::string& text);

}  // namespace orrery::cli
