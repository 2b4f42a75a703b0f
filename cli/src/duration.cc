#include "cli/src/duration.h"

#include <cctype>

namespace orrery::cli {

Result<double> ParseDuration(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("\"" + std::string(text.substr(0, 64)) +
                                   "\" is not a duration (" + why +
                                   "; e.g. 7d, 12h, 30m, 45s or 45)");
  };
  if (text.empty()) return bad("it is empty");
  constexpr double kUnits[] = {1, 60, 3600, 86400};
  size_t u = std::string_view("smhd").find(text.back());
  double unit = u == std::string_view::npos ? 1 : kUnits[u];
  std::string_view digits = u == std::string_view::npos ? text : text.substr(0, text.size() - 1);
  if (digits.empty()) return bad("no number before the unit");
  double value = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return bad("a whole number followed by s, m, h or d");
    value = value * 10 + (c - '0');
    if (value * unit > kMaxDurationS) return bad("longer than 100 years");
  }
  return value * unit;
}

std::string CheckDuration(const std::string& text) {
  auto d = ParseDuration(text);
  return d.ok() ? std::string() : d.status().message();
}

}  // namespace orrery::cli
