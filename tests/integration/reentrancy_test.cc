// An actor's calls interleave only where one waits in Get/Wait, never run beyond its
// max_concurrency: a call back from a Get waits for a free slot instead of running beside
// the call that started while it waited.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "remote_functions.h"
#include "test_support.h"

namespace {

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }
void Touch(const std::string& path) { std::ofstream(path) << "x"; }

// Counts the calls running inside it (not those waiting in a Get).
class Probe {
 public:
  static Probe* Create() { return new Probe(); }

  // Runs, waits in Get for the gate (its slot free for other calls), then runs again and
  // marks `resumed_marker`.
  int WaitOnGate(orrery::ActorHandle<Gate> gate, std::string resumed_marker) {
    Enter();
    Exit();
    int v = *orrery::Get(gate.Task(&Gate::WaitOpen).Remote(1, 60000), 60000);
    Enter();
    Touch(resumed_marker);
    Exit();
    return v;
  }

  // Runs, marks `entered_marker`, and keeps running (a plain sleep holds its slot) until
  // `release_marker` exists.
  int Hold(std::string entered_marker, std::string release_marker) {
    Enter();
    Touch(entered_marker);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!Exists(release_marker) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    Exit();
    return 2;
  }

  int MaxInside() { return max_inside_.load(); }

 private:
  void Enter() {
    int now = ++inside_;
    int seen = max_inside_.load();
    while (now > seen && !max_inside_.compare_exchange_weak(seen, now)) {
    }
  }
  void Exit() { --inside_; }

  std::atomic<int> inside_{0};
  std::atomic<int> max_inside_{0};
};

ORRERY_REMOTE(Probe::Create, &Probe::WaitOnGate, &Probe::Hold, &Probe::MaxInside);

using orrery_test::kGetTimeoutMs;

// A call blocks in Get while `n` others take every slot; its Get then returns while they
// still run. It must wait for a slot: at most n calls ever run at once.
void ExpectResumedCallWaitsForASlot(int n) {
  orrery_test::ActorReaper reaper;
  auto probe = reaper.Add(orrery::Actor(Probe::Create).SetMaxConcurrency(n).Remote());
  auto gate = reaper.Add(orrery::Actor(Gate::Create).SetMaxConcurrency(2).Remote());
  orrery_test::TempMarker resumed, release;
  std::vector<orrery_test::TempMarker> entered(n);
  auto waiter = probe.Task(&Probe::WaitOnGate).Remote(gate, resumed.path());
  std::vector<orrery::ObjectRef<int>> holders;
  for (int i = 0; i < n; ++i)
    holders.push_back(probe.Task(&Probe::Hold).Remote(entered[i].path(), release.path()));
  ASSERT_TRUE(orrery_test::WaitFor([&] {
    return std::all_of(entered.begin(), entered.end(), [](auto& m) { return Exists(m.path()); });
  })) << "the holding calls did not start while the first call waited in Get";
  orrery::Get(gate.Task(&Gate::Open).Remote(), kGetTimeoutMs);
  // Gives a resumption that does not wait for its slot the time to show itself.
  bool resumed_beside_holders =
      orrery_test::WaitFor([&] { return Exists(resumed.path()); }, std::chrono::milliseconds(2000));
  Touch(release.path());
  EXPECT_EQ(*orrery::Get(waiter, kGetTimeoutMs), 1);
  for (auto& h : holders) EXPECT_EQ(*orrery::Get(h, kGetTimeoutMs), 2);
  EXPECT_FALSE(resumed_beside_holders)
      << "the call resumed while " << n << " other call(s) held every slot";
  EXPECT_LE(*orrery::Get(probe.Task(&Probe::MaxInside).Remote(), kGetTimeoutMs), n);
}

TEST(ReentrancyTest, DefaultActorResumesOnlyWhenTheOtherCallEnds) {
  ExpectResumedCallWaitsForASlot(1);
}

TEST(ReentrancyTest, MaxConcurrencyTwoNeverRunsThree) { ExpectResumedCallWaitsForASlot(2); }

// Many calls that each wait in Get on another call to the same actor: all return, and
// none ran beside another.
TEST(ReentrancyTest, NestedCallsToTheSameActorAllReturn) {
  orrery_test::ActorReaper reaper;
  auto counter = reaper.Add(orrery::Actor(Counter::Create).Remote(0));
  auto caller = reaper.Add(orrery::Actor(Caller::Create).Remote());
  std::vector<orrery::ObjectRef<int>> refs;
  for (int i = 0; i < 20; ++i) refs.push_back(caller.Task(&Caller::IncOther).Remote(counter, 1));
  std::vector<std::shared_ptr<int>> values = orrery::Get(refs, kGetTimeoutMs);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(*values[i], i + 1);
}

}  // namespace
