// The order in which an actor's worker starts calls (docs/protocol.md "Call order without gaps"):
// the calls of one caller start in their sequence order, whatever socket or thread they came
// through. A call that arrives early waits for the ones before it, but not forever: a number
// is known to have been sent once a later one arrives, or once the caller says how far it
// has sent (Expect, from kCallsSent: a call lost with nothing behind it leaves no gap to
// see otherwise). A number still missing gap_timeout_s after it was known to be sent (longer
// than the transport keeps an undelivered message, SendLimits::drain_s) is given up on,
// reported to its caller as lost, and the calls behind it start. That time is counted on a
// clock that the ticks advance by at most kMaxTickStepS each, and not at all while the worker
// has calls unread in its socket: while its loop is held by a long call (its ticks late) or
// works through a backlog, a missing call may be sitting unread there, and is not given up
// on for that. A caller with nothing waiting or running here for idle_forget_s
// is forgotten; its next call's first_pending says where its sequence goes on.
//
// Pure bookkeeping, no I/O: the worker feeds calls in and runs what comes out; unit tests
// drive it with a clock of their own. Thread-safety: every method may be called from any
// thread (the worker's call loop adds and ticks; a call's thread finishes it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/internal/thread_annotations.h"

namespace orrery::runtime {

struct CallOrderOptions {
  double gap_timeout_s = 45;
  double idle_forget_s = 600;
  size_t max_waiting_per_caller = 65536;  // calls held behind a missing number, per caller
  size_t max_callers = 65536;             // callers known at once (each peer names its own)
};

// Calls [first_seq, end_seq) of `caller` never arrived and will not run.
struct LostCalls {
  std::string caller;
  uint64_t first_seq = 0;
  uint64_t end_seq = 0;
};

template <typename Call>
class CallOrder {
 public:
  enum class Admit {
    kQueued,          // waiting, or appended to *ready with the calls it let go
    kDuplicate,       // its number was started or given up on already: it must not run
    kTooMany,         // max_waiting_per_caller calls already wait behind a gap: refused
    kTooManyCallers,  // a caller not known while max_callers are: refused
  };

  explicit CallOrder(CallOrderOptions options = {}) : options_(options) {}

  // Call `seq` of `caller`, who waits for no reply below `first_pending`. Appends the calls
  // that may start now, in order, to *ready (each counts as running until Finished).
  Admit Add(const std::string& caller, uint64_t seq, uint64_t first_pending, Call call, double now,
            std::vector<Call>* ready) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    Caller* known = Touch(caller, now);
    if (known == nullptr) return Admit::kTooManyCallers;
    Caller& c = *known;
    // Numbers below first_pending were answered or reported lost: never wait for them.
    if (first_pending > c.next) Skip(c, first_pending, ready);
    if (seq < c.next || c.waiting.count(seq)) return Admit::kDuplicate;
    // The number the gap waits for is always let in: it lets the others go.
    if (seq != c.next && c.waiting.size() >= options_.max_waiting_per_caller)
      return Admit::kTooMany;
    c.waiting.emplace(seq, std::move(call));
    Known(c, seq + 1);
    Release(c, ready);
    return Admit::kQueued;
  }

  // `caller` has handed every number below `end_seq` to the transport and waits for no
  // reply below `first_pending`: the numbers between that have not arrived are missing
  // (timed as any gap). A caller none of whose calls arrived is known from here on (unless
  // max_callers are: then this is ignored).
  void Expect(const std::string& caller, uint64_t first_pending, uint64_t end_seq, double now,
              std::vector<Call>* ready) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    Caller* c = Touch(caller, now);
    if (c == nullptr) return;
    if (first_pending > c->next) Skip(*c, first_pending, ready);
    Known(*c, end_seq);
  }

  // A call of `caller` returned from *ready has ended.
  void Finished(const std::string& caller, double now) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    auto it = callers_.find(caller);
    if (it == callers_.end()) return;
    if (it->second.running > 0) --it->second.running;
    it->second.last_active = now;
  }

  // Gives up on numbers known to be sent gap_timeout_s ago that have not arrived (appended
  // to *lost; the calls behind them to *ready) and forgets idle callers. The worker calls
  // it about once a second; `caught_up`: it had read every message its socket held (while
  // it had not, a missing call may be among them, and the time does not count).
  void Tick(double now, bool caught_up, std::vector<Call>* ready, std::vector<LostCalls>* lost)
      EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (last_tick_ >= 0 && caught_up)
      clock_ += std::min(std::max(now - last_tick_, 0.0), kMaxTickStepS);
    last_tick_ = now;
    for (auto it = callers_.begin(); it != callers_.end();) {
      Caller& c = it->second;
      uint64_t give_up_end = 0;  // every number below it has been missing long enough
      while (!c.known.empty() && clock_ - c.known.front().first >= options_.gap_timeout_s) {
        give_up_end = c.known.front().second;
        c.known.pop_front();
      }
      if (give_up_end > c.next) {
        GiveUp(it->first, c, give_up_end, ready, lost);
        c.last_active = now;
      }
      bool idle =
          c.next >= c.known_end && c.running == 0 && now - c.last_active >= options_.idle_forget_s;
      it = idle ? callers_.erase(it) : std::next(it);
    }
  }

  size_t callers() const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return callers_.size();
  }
  // The number `caller`'s next call to start must have (0 for a caller not known).
  uint64_t next(const std::string& caller) const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    auto it = callers_.find(caller);
    return it == callers_.end() ? 0 : it->second.next;
  }

 private:
  struct Caller {
    uint64_t next = 0;
    std::map<uint64_t, Call> waiting;
    uint64_t known_end = 0;  // the caller has sent every number below this
    // When (on clock_) known_end grew, and to what: a number missing below such an end is
    // timed from then. Oldest first; entries at or below next are dropped.
    std::deque<std::pair<double, uint64_t>> known;
    int running = 0;
    double last_active = 0;
  };
  static constexpr double kMaxTickStepS = 2;

  // `caller`'s record, made if new; nullptr for a new one while max_callers are known.
  Caller* Touch(const std::string& caller, double now) REQUIRES(mu_) {
    if (last_tick_ < 0) last_tick_ = now;  // the serving clock starts with the first call
    auto it = callers_.find(caller);
    if (it == callers_.end()) {
      if (callers_.size() >= options_.max_callers) return nullptr;
      it = callers_.try_emplace(caller).first;
    }
    it->second.last_active = now;
    return &it->second;
  }
  // Every number below `end` was sent; those not started yet are timed from now. Past
  // max_waiting_per_caller entries the newest absorbs the new end and is timed from now:
  // the numbers it covered are given up on later, never sooner.
  void Known(Caller& c, uint64_t end) REQUIRES(mu_) {
    if (end <= c.known_end) return;
    c.known_end = end;
    if (end <= c.next) return;
    if (c.known.size() >= options_.max_waiting_per_caller)
      c.known.back() = {clock_, end};
    else
      c.known.emplace_back(clock_, end);
  }
  // Moves the calls that are next in line to *ready.
  void Release(Caller& c, std::vector<Call>* ready) REQUIRES(mu_) {
    while (!c.waiting.empty() && c.waiting.begin()->first == c.next) {
      ready->push_back(std::move(c.waiting.begin()->second));
      c.waiting.erase(c.waiting.begin());
      ++c.next;
      ++c.running;
    }
    while (!c.known.empty() && c.known.front().second <= c.next) c.known.pop_front();
  }
  // Stops waiting for the numbers below `resume`: waiting calls below it are dropped (their
  // caller no longer waits for them), the calls from `resume` on are released.
  void Skip(Caller& c, uint64_t resume, std::vector<Call>* ready) REQUIRES(mu_) {
    c.waiting.erase(c.waiting.begin(), c.waiting.lower_bound(resume));
    c.next = resume;
    c.known_end = std::max(c.known_end, resume);
    Release(c, ready);
  }
  // Gives up on the missing numbers below `end`, run by run, releasing what arrived between.
  void GiveUp(const std::string& caller, Caller& c, uint64_t end, std::vector<Call>* ready,
              std::vector<LostCalls>* lost) REQUIRES(mu_) {
    while (c.next < end) {
      uint64_t resume = c.waiting.empty() ? end : std::min(end, c.waiting.begin()->first);
      lost->push_back(LostCalls{caller, c.next, resume});
      c.next = resume;
      Release(c, ready);
    }
  }

  const CallOrderOptions options_;
  mutable Mutex mu_;
  std::map<std::string, Caller> callers_ GUARDED_BY(mu_);
  double clock_ GUARDED_BY(mu_) = 0;  // seconds of serving, as the ticks count them
  double last_tick_ GUARDED_BY(mu_) = -1;
};

}  // namespace orrery::runtime
