#include "actors/src/wait_spin.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <string>

#include "core/internal/log.h"

namespace orrery::internal {
namespace {

constexpr int kDefaultBudgetUs = 300;
constexpr int kMaxBudgetUs = 10000;
// The share of recent waits that ended within the budget, in 1/1024ths, as a moving
// average over about the last 8; the thread watches while it is at least a half.
constexpr int kScale = 1024;
constexpr int kWatchFrom = kScale / 2;
thread_local int t_quick_share = kScale;
// A gap this long between two looks at the clock while watching: the thread lost its core.
constexpr int64_t kPreemptedNs = 50'000;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int ParseWaitSpinBudgetUs(const char* text) {
  if (text == nullptr || *text == '\0') return kDefaultBudgetUs;
  std::string s(text);
  bool digits = s.size() <= 6 && std::all_of(s.begin(), s.end(),
                                             [](unsigned char c) { return std::isdigit(c) != 0; });
  if (!digits || std::atoi(text) > kMaxBudgetUs) {
    LOG_WARN("ORRERY_WAIT_SPIN_US must be a number of microseconds from 0 to " +
             std::to_string(kMaxBudgetUs) + ", not '" + s + "'; using " +
             std::to_string(kDefaultBudgetUs));
    return kDefaultBudgetUs;
  }
  return std::atoi(text);
}

int WaitSpinBudgetUs() {
  static const int budget = ParseWaitSpinBudgetUs(std::getenv("ORRERY_WAIT_SPIN_US"));
  return budget;
}

WaitSpin::WaitSpin(long long limit_us, long long budget_us) {
  // A wait with no time to watch (a timeout of 0: a look) neither watches nor counts.
  long long watch_us = limit_us >= 0 ? std::min(budget_us, limit_us) : budget_us;
  if (watch_us <= 0) return;
  start_ns_ = last_ns_ = NowNs();
  budget_ns_ = budget_us * 1000;
  deadline_ns_ = start_ns_ + watch_us * 1000;
  watch_ = t_quick_share >= kWatchFrom;
}

WaitSpin::~WaitSpin() {
  if (budget_ns_ == 0) return;
  bool quick = !preempted_ && (found_ || NowNs() - start_ns_ <= budget_ns_);
  t_quick_share += quick ? (kScale - t_quick_share) / 8 : -t_quick_share / 8;
}

bool WaitSpin::Expired() {
  if ((++polls_ & 63u) != 0) return false;
  int64_t now = NowNs();
  // A gap between two looks at the clock, which come every few microseconds while this
  // thread runs, means it lost its core: others want the CPU, so it sleeps instead.
  if (now - last_ns_ > kPreemptedNs) preempted_ = true;
  last_ns_ = now;
  return preempted_ || now >= deadline_ns_;
}

void WaitSpin::Relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace orrery::internal
