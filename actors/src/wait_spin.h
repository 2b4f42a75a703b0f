// Watching for a value before sleeping on it (docs/architecture.md "Waiting").
//
// A synchronous call's reply arrives some 100 us after it was sent. A thread that sleeps on
// a condition variable for it pays a futex wake-up, and the core it leaves falls idle, which
// on a virtual machine costs an exit to the hypervisor and an interrupt to come back. A
// thread about to sleep therefore first watches a completion counter for a short budget
// (ORRERY_WAIT_SPIN_US, 300 us by default, 0 turns it off), as BEAM's schedulers and
// adaptive mutexes do. Each thread decides for itself from its own recent waits: it watches
// only while most of them (a moving average) ended within the budget, counting those it
// slept through by how long they took. A thread whose values take long (a slow task, a
// remote host) soon stops spending CPU on watching, and comes back to it when they are
// quick again.
#pragma once

#include <atomic>
#include <cstdint>

namespace orrery::internal {

// The budget in microseconds (read from the environment once; 0: off).
int WaitSpinBudgetUs();
// ORRERY_WAIT_SPIN_US's value read as a budget: null or empty gives the default, anything
// but 0 to 10000 microseconds the default with a warning.
int ParseWaitSpinBudgetUs(const char* text);

// One wait of the calling thread. Spin() watches, the destructor records how the wait went.
class WaitSpin {
 public:
  // `limit_us`: the wait's own timeout (negative: none); the watch never outlasts it.
  explicit WaitSpin(long long limit_us) : WaitSpin(limit_us, WaitSpinBudgetUs()) {}
  // With a budget of its own (tests).
  WaitSpin(long long limit_us, long long budget_us);
  ~WaitSpin();
  WaitSpin(const WaitSpin&) = delete;
  WaitSpin& operator=(const WaitSpin&) = delete;

  // Watches `completions` (a counter bumped whenever something completes) until the budget
  // runs out, calling `ready()` each time it moves; true as soon as ready() is. False at
  // once when this thread's recent waits say watching would not pay.
  template <typename Ready>
  bool Spin(const std::atomic<uint64_t>& completions, Ready ready);
  // Whether the watch stopped because the thread lost its core.
  bool preempted() const { return preempted_; }

 private:
  // Reads the clock every 64 calls: true past the deadline, or when the thread lost its core.
  bool Expired();
  static void Relax();

  int64_t start_ns_ = 0;
  int64_t budget_ns_ = 0;
  int64_t deadline_ns_ = 0;
  int64_t last_ns_ = 0;
  unsigned polls_ = 0;
  bool watch_ = false;
  bool found_ = false;
  bool preempted_ = false;
};

template <typename Ready>
bool WaitSpin::Spin(const std::atomic<uint64_t>& completions, Ready ready) {
  if (!watch_) return false;
  uint64_t seen = completions.load(std::memory_order_acquire);
  if (ready()) return found_ = true;  // completed since the caller last looked
  while (!Expired()) {
    uint64_t now = completions.load(std::memory_order_acquire);
    if (now != seen) {
      seen = now;
      if (ready()) return found_ = true;
    }
    Relax();
  }
  return found_ = ready();  // one that completed as the budget ran out
}

}  // namespace orrery::internal
