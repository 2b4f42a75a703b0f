#include "core/internal/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace orrery::metrics {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::Observe(double value) {
  if (std::isnan(value)) return;
  size_t i = 0;
  while (i < bounds.size() && value > bounds[i]) ++i;
  ++counts[i];
  sum += value;
}

uint64_t Histogram::count() const {
  uint64_t n = 0;
  for (uint64_t c : counts) n += c;
  return n;
}

void Histogram::Merge(const Histogram& other) {
  if (other.bounds == bounds && other.counts.size() == counts.size()) {
    for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
  } else {
    counts.back() += other.count();
  }
  sum += other.sum;
}

std::vector<double> ExponentialBounds(double start, double factor, size_t n) {
  std::vector<double> out;
  double v = start;
  for (size_t i = 0; i < n; ++i, v *= factor) out.push_back(v);
  return out;
}

namespace {
// The length of the valid UTF-8 sequence at s[i], or 0.
size_t Utf8Length(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t cp = n == 1 ? c : c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    auto b = static_cast<unsigned char>(s[i + k]);
    if ((b >> 6) != 2) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}
}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size();) {
    char c = value[i];
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    }
    size_t n = Utf8Length(value, i);
    if (c == '\\' || c == '"' || c == '\n') {
      i += 1;
    } else if (n == 0) {
      out += '?';
      i += 1;
    } else {
      out.append(value.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  for (int precision : {15, 17}) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

namespace {
bool NameChar(char c, bool first, bool colon) {
  bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return alpha || (colon && c == ':') || (!first && c >= '0' && c <= '9');
}
}  // namespace

bool ValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (!NameChar(name[i], i == 0, true)) return false;
  return true;
}

bool ValidLabelName(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__") return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (!NameChar(name[i], i == 0, false)) return false;
  return true;
}

void Exposition::Begin(const std::string& name, Type type, const std::string& help) {
  family_ = ValidMetricName(name) ? name : "";
  type_ = type;
  if (family_.empty()) return;
  std::string escaped_help;
  for (char c : help) {
    if (c == '\\')
      escaped_help += "\\\\";
    else if (c == '\n')
      escaped_help += "\\n";
    else
      escaped_help += c;
  }
  const char* t = type == Type::kCounter ? "counter" : type == Type::kGauge ? "gauge" : "histogram";
  out_ += "# HELP " + name + " " + escaped_help + "\n# TYPE " + name + " " + t + "\n";
}

void Exposition::Line(const std::string& name, const Labels& labels, const std::string& extra_label,
                      const std::string& value) {
  std::string line = name;
  std::string inner;
  for (const auto& [k, v] : labels) {
    if (!ValidLabelName(k) || k == "le") return;  // a bad label drops the sample, not the text
    inner += (inner.empty() ? "" : ",") + k + "=\"" + EscapeLabelValue(v) + "\"";
  }
  if (!extra_label.empty()) inner += (inner.empty() ? "" : ",") + extra_label;
  if (!inner.empty()) line += "{" + inner + "}";
  out_ += line + " " + value + "\n";
}

void Exposition::Add(const Labels& labels, double value) {
  if (family_.empty() || type_ == Type::kHistogram) return;
  Line(family_, labels, "", FormatValue(value));
}

void Exposition::AddHistogram(const Labels& labels, const Histogram& h) {
  if (family_.empty() || type_ != Type::kHistogram) return;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.counts.size(); ++i) {
    cumulative += h.counts[i];
    double le = i < h.bounds.size() ? h.bounds[i] : std::numeric_limits<double>::infinity();
    Line(family_ + "_bucket", labels, "le=\"" + FormatValue(le) + "\"", std::to_string(cumulative));
  }
  Line(family_ + "_sum", labels, "", FormatValue(h.sum));
  Line(family_ + "_count", labels, "", std::to_string(cumulative));
}

}  // namespace orrery::metrics
