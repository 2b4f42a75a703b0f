// A log line that a peer can trigger at will (a dropped message, a handler that threw) is
// written at most once per period, with the number of occurrences it stands for, so a flood
// cannot fill the disk or spend the loop's time logging.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "core/internal/clock.h"

namespace orrery {

class RateLimitedLog {
 public:
  explicit RateLimitedLog(double period_s = 1.0) : period_s_(period_s) {}

  // Counts one occurrence; returns true (and in *suppressed the occurrences since the last
  // line that were not logged) when this one should be logged. Thread-safe.
  bool ShouldLog(uint64_t* suppressed) {
    uint64_t n = count_.fetch_add(1, std::memory_order_relaxed) + 1;
    double now = MonotonicSeconds();
    double last = last_.load(std::memory_order_relaxed);
    if (last != 0 && now - last < period_s_) return false;
    if (!last_.compare_exchange_strong(last, now)) return false;
    uint64_t logged = logged_at_.exchange(n);
    *suppressed = n - logged - 1;
    return true;
  }

  // " (and N more like it)" when some were suppressed, else "".
  static std::string More(uint64_t suppressed) {
    return suppressed ? " (and " + std::to_string(suppressed) + " more like it in the last period)"
                      : "";
  }

 private:
  double period_s_;
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> logged_at_{0};
  std::atomic<double> last_{0};
};

}  // namespace orrery
