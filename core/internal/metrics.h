// Prometheus metrics (docs/metrics.md): histograms with fixed buckets, and the text
// exposition format 0.0.4 that the daemons serve at /metrics (metrics_server.h). Nothing
// here is thread-safe: each daemon builds its text on its own inbox thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace orrery::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Counts of observations per bucket. `counts` has one entry per upper bound plus the last,
// +Inf; each counts only the observations that fell in it (not cumulative).
struct Histogram {
  std::vector<double> bounds;  // ascending upper bounds, +Inf excluded
  std::vector<uint64_t> counts;
  double sum = 0;

  explicit Histogram(std::vector<double> upper_bounds = {});
  void Observe(double value);
  uint64_t count() const;
  // Adds `other`'s observations (same bounds; otherwise only its sum and count are added,
  // into +Inf).
  void Merge(const Histogram& other);
};

// n upper bounds: start, start * factor, start * factor^2, ...
std::vector<double> ExponentialBounds(double start, double factor, size_t n);

// A label value as the text format writes it between quotes: backslash, double quote and
// newline escaped; bytes that are not UTF-8 replaced by '?'.
std::string EscapeLabelValue(std::string_view value);
// A sample value: "+Inf", "-Inf", "NaN", or the shortest decimal that reads back the same.
std::string FormatValue(double value);
// Whether `name` is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or label name
// ([a-zA-Z_][a-zA-Z0-9_]*, not starting with "__").
bool ValidMetricName(std::string_view name);
bool ValidLabelName(std::string_view name);

// Builds one exposition: a family (Begin) is followed by its samples. A family or label
// with an invalid name is dropped, never written (the result always parses).
class Exposition {
 public:
  enum class Type { kCounter, kGauge, kHistogram };
  void Begin(const std::string& name, Type type, const std::string& help);
  void Add(const Labels& labels, double value);
  // A histogram sample set: NAME_bucket{le=...} (cumulative), NAME_sum, NAME_count.
  void AddHistogram(const Labels& labels, const Histogram& h);
  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void Line(const std::string& name, const Labels& labels, const std::string& extra_label,
            const std::string& value);

  std::string out_;
  std::string family_;  // "" when the current family was dropped
  Type type_ = Type::kGauge;
};

}  // namespace orrery::metrics
