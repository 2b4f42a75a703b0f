// TimeIt: the measuring loop of Ray's microbenchmarks (ray_microbenchmark_helpers.timeit),
// with the durations as parameters: run `fn` for a warm-up period, then for `rounds`
// rounds of duration/rounds seconds each, and report the mean and standard deviation of
// the per-round rates. `multiplier` is the number of operations one call of `fn` performs
// (1000 for a batch of 1000 calls).
#pragma once

#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace orrery::bench {

struct TimingOptions {
  double warmup_s = 1.0;
  double duration_s = 5.0;  // measured time, split into `rounds` rounds
  int rounds = 4;
};

struct Rate {
  double mean = 0;  // operations per second
  double sd = 0;
  long long calls = 0;  // calls of fn during the measured rounds
  // What else a metric measured (threads, resident bytes), printed after its rate.
  std::map<std::string, double> extra;
};

// The mean and standard deviation of per-round `rates` (at least one), `calls` calls made.
inline Rate RateOf(const std::vector<double>& rates, long long calls) {
  Rate out;
  out.calls = calls;
  double sum = 0;
  for (double x : rates) sum += x;
  out.mean = sum / static_cast<double>(rates.size());
  double var = 0;
  for (double x : rates) var += (x - out.mean) * (x - out.mean);
  out.sd = std::sqrt(var / static_cast<double>(rates.size()));
  return out;
}

inline Rate TimeIt(const std::function<void()>& fn, double multiplier, const TimingOptions& opt) {
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  // Warm-up; also sizes the step so the clock is read about ten times a second.
  long long warm = 0;
  Clock::time_point start = Clock::now();
  do {
    fn();
    ++warm;
  } while (seconds_since(start) < opt.warmup_s);
  const double per_call_s = seconds_since(start) / static_cast<double>(warm);
  long long step = static_cast<long long>(0.1 / std::max(per_call_s, 1e-9));
  step = std::max(1LL, step);

  const int rounds = std::max(1, opt.rounds);
  const double round_s = opt.duration_s / rounds;
  std::vector<double> rates;
  long long calls = 0;
  for (int r = 0; r < rounds; ++r) {
    long long count = 0;
    start = Clock::now();
    double elapsed = 0;
    do {
      for (long long i = 0; i < step; ++i) fn();
      count += step;
      elapsed = seconds_since(start);
    } while (elapsed < round_s);
    rates.push_back(multiplier * static_cast<double>(count) / elapsed);
    calls += count;
  }
  return RateOf(rates, calls);
}

}  // namespace orrery::bench
