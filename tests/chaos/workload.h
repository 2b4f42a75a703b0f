// The chaos test's load: an actor class and a task whose answers can be checked, the loops
// that call them and enter every call in a Ledger, and the training loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "orrery/train/train.h"
#include "tests/chaos/ledger.h"

namespace orrery_chaos {

// Every Get of the load waits at most this long; a GetTimeoutError counts as a hang.
constexpr int kGetTimeoutMs = 60000;

class Echo {
 public:
  static Echo* Create(int64_t salt) { return new Echo(salt); }
  // Depends on the salt, so an answer from the wrong actor is caught.
  int64_t Call(int64_t x) { return x * 3 + salt_; }

 private:
  explicit Echo(int64_t salt) : salt_(salt) {}
  int64_t salt_;
};

int64_t Twice(int64_t x);

// Two workers all-reduce a 512 KiB vector (the ring or shared-memory path) every step and
// check the sum, checkpoint every 10 steps, and stop together once rank 0 sees the file
// named by the loop config's "stop_file". Reports {"step", "allreduce_ok"}.
void ChaosTrainLoop(orrery::train::Context& ctx);

// What the load threads share.
struct Load {
  Ledger ledger;
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::set<std::string> actor_names;  // every name the load created
  void Named(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu);
    actor_names.insert(name);
  }
};

// Calls one named actor ("chaos-a<index>-g<generation>") until load->stop; even-numbered
// threads' actors restart (with retried calls), odd ones die for good and are replaced.
void ActorLoad(int index, Load* load);
// Submits tasks four at a time and gets each, until load->stop.
void TaskLoad(Load* load);

void Nap(int ms);

}  // namespace orrery_chaos
