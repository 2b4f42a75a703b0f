// An actor's calls never interleave at a Get/Wait: a waiting call keeps its slot, so a
// default actor runs each method to its end before the next, and a method that would wait
// on a call queued behind it on its own actor fails at once.
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

using orrery_test::AwaitMarker;
using orrery_test::Exists;
using orrery_test::Touch;

// Counts the calls running inside it, waits included.
class Probe {
 public:
  static Probe* Create() { return new Probe(); }

  // Reads the count, waits in Get for the gate, then writes the count back plus one: a call
  // that ran during the wait would have its increment lost.
  int ReadWaitWrite(orrery::ActorHandle<Gate> gate, std::string entered_marker) {
    Enter();
    int read = count_;
    Touch(entered_marker);
    int v = *orrery::Get(gate.Task(&Gate::WaitOpen).Remote(1, 60000), 60000);
    count_ = read + v;
    Exit();
    return count_;
  }

  // Marks `started_marker` and adds one to the count.
  int Increment(std::string started_marker) {
    Enter();
    Touch(started_marker);
    ++count_;
    Exit();
    return count_;
  }

  // Runs, marks `entered_marker`, and keeps running until `release_marker` exists.
  int Hold(std::string entered_marker, std::string release_marker) {
    Enter();
    Touch(entered_marker);
    AwaitMarker(release_marker);
    Exit();
    return 2;
  }

  // Calls Count on its own actor (`self`) and waits for the answer.
  int CountViaSelf(orrery::ActorHandle<Probe> self) {
    return *orrery::Get(self.Task(&Probe::Count).Remote(), 60000);
  }

  // As CountViaSelf, with Wait.
  int WaitOnSelf(orrery::ActorHandle<Probe> self) {
    auto ref = self.Task(&Probe::Count).Remote();
    std::vector<orrery::ObjectRef<int>> refs{ref};
    return int(orrery::Wait(refs, 1, 60000).ready.size());
  }

  // Polls a call to its own actor (Wait with timeout 0): not ready, and no error.
  int PollSelf(orrery::ActorHandle<Probe> self) {
    std::vector<orrery::ObjectRef<int>> refs{self.Task(&Probe::Count).Remote()};
    return int(orrery::Wait(refs, 1, 0).unready.size());
  }

  int Count() { return count_; }
  int MaxInside() { return max_inside_.load(); }

 private:
  void Enter() {
    int now = ++inside_;
    int seen = max_inside_.load();
    while (now > seen && !max_inside_.compare_exchange_weak(seen, now)) {
    }
  }
  void Exit() { --inside_; }

  int count_ = 0;
  std::atomic<int> inside_{0};
  std::atomic<int> max_inside_{0};
};

ORRERY_REMOTE(Probe::Create, &Probe::ReadWaitWrite, &Probe::Increment, &Probe::Hold,
              &Probe::CountViaSelf, &Probe::WaitOnSelf, &Probe::PollSelf, &Probe::Count,
              &Probe::MaxInside);

using orrery_test::kGetTimeoutMs;

// A default actor's method waits in Get while a second call is queued: the second starts
// only after the first returns, so the first's read-wait-write loses no update.
TEST(ReentrancyTest, DefaultActorHoldsTheActorAcrossAGet) {
  orrery_test::ActorReaper reaper;
  auto probe = reaper.Add(orrery::Actor(Probe::Create).Remote());
  auto gate = reaper.Add(orrery::Actor(Gate::Create).SetMaxConcurrency(2).Remote());
  orrery_test::TempMarker entered, second_started;
  auto first = probe.Task(&Probe::ReadWaitWrite).Remote(gate, entered.path());
  ASSERT_TRUE(orrery_test::WaitFor([&] { return Exists(entered.path()); }))
      << "the first call never started";
  auto second = probe.Task(&Probe::Increment).Remote(second_started.path());
  // Gives a second call that does not wait for the first the time to show itself.
  bool started_during_wait = orrery_test::WaitFor([&] { return Exists(second_started.path()); },
                                                  std::chrono::milliseconds(2000));
  orrery::Get(gate.Task(&Gate::Open).Remote(), kGetTimeoutMs);
  EXPECT_FALSE(started_during_wait) << "the second call started while the first waited in Get";
  EXPECT_EQ(*orrery::Get(first, kGetTimeoutMs), 1);
  EXPECT_EQ(*orrery::Get(second, kGetTimeoutMs), 2) << "an update was lost";
  EXPECT_EQ(*orrery::Get(probe.Task(&Probe::MaxInside).Remote(), kGetTimeoutMs), 1);
}

// With max_concurrency n, a call waiting in Get keeps its slot: n - 1 others run beside it,
// the next one only once a slot is free.
TEST(ReentrancyTest, AWaitKeepsItsSlotUnderMaxConcurrency) {
  const int n = 2;
  orrery_test::ActorReaper reaper;
  auto probe = reaper.Add(orrery::Actor(Probe::Create).SetMaxConcurrency(n).Remote());
  auto gate = reaper.Add(orrery::Actor(Gate::Create).SetMaxConcurrency(2).Remote());
  orrery_test::TempMarker waiter_entered, release, beside, behind;
  auto waiter = probe.Task(&Probe::ReadWaitWrite).Remote(gate, waiter_entered.path());
  ASSERT_TRUE(orrery_test::WaitFor([&] { return Exists(waiter_entered.path()); }));
  auto holder = probe.Task(&Probe::Hold).Remote(beside.path(), release.path());
  ASSERT_TRUE(orrery_test::WaitFor([&] { return Exists(beside.path()); }))
      << "the second slot was not used while the first call waited";
  auto third = probe.Task(&Probe::Increment).Remote(behind.path());
  bool third_started =
      orrery_test::WaitFor([&] { return Exists(behind.path()); }, std::chrono::milliseconds(2000));
  Touch(release.path());
  orrery::Get(gate.Task(&Gate::Open).Remote(), kGetTimeoutMs);
  EXPECT_FALSE(third_started) << "a third call ran while " << n << " calls held the slots";
  EXPECT_EQ(*orrery::Get(holder, kGetTimeoutMs), 2);
  orrery::Get(waiter, kGetTimeoutMs);
  orrery::Get(third, kGetTimeoutMs);
  EXPECT_LE(*orrery::Get(probe.Task(&Probe::MaxInside).Remote(), kGetTimeoutMs), n);
}

// A default actor's method that waits on a call to its own actor (queued behind it) fails at
// once with an error that says so, instead of waiting forever; the actor goes on serving.
TEST(ReentrancyTest, WaitingOnACallToItsOwnActorFailsFast) {
  orrery_test::ActorReaper reaper;
  auto probe = reaper.Add(orrery::Actor(Probe::Create).Remote());
  auto start = std::chrono::steady_clock::now();
  for (auto ref : {probe.Task(&Probe::CountViaSelf).Remote(probe),
                   probe.Task(&Probe::WaitOnSelf).Remote(probe)}) {
    try {
      orrery::Get(ref, kGetTimeoutMs);
      ADD_FAILURE() << "a method waiting on its own actor returned";
    } catch (const orrery::RemoteError& e) {
      EXPECT_NE(std::string(e.what()).find("would wait forever"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("Probe::Count"), std::string::npos) << e.what();
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(kGetTimeoutMs))
      << "the failure was not fast";
  EXPECT_EQ(*orrery::Get(probe.Task(&Probe::Count).Remote(), kGetTimeoutMs), 0);
  // A poll (timeout 0) of a call to its own actor is no wait: it answers "not ready".
  EXPECT_EQ(*orrery::Get(probe.Task(&Probe::PollSelf).Remote(probe), kGetTimeoutMs), 1);
}

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
