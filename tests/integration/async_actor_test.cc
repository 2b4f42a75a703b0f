// Async actors (docs/api.md "Async actors"): a method returning orrery::Async<T> co_awaits
// refs without holding a thread; the actor's one call thread holds many calls in flight,
// interleaving only at a co_await, within SetMaxConcurrency's bound; cancellation reaches a
// suspended call.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

namespace {

using orrery_test::ActorReaper;
using orrery_test::kGetTimeoutMs;
using orrery_test::TempMarker;
using orrery_test::WaitFor;

using orrery_test::AwaitMarker;
using orrery_test::Exists;
using orrery_test::Touch;

int64_t Square(int64_t x) { return x * x; }
// Returns `v` once `gate` exists (waits up to a minute).
int GatedValue(int v, std::string gate) {
  AwaitMarker(gate);
  return v;
}

int ThreadsOfThisProcess() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

class Gatherer {
 public:
  static Gatherer* Create() { return new Gatherer(); }

  // Fans out n tasks and gathers them without a thread per task.
  orrery::Async<int64_t> SumOfSquares(int n) {
    std::vector<orrery::ObjectRef<int64_t>> refs;
    refs.reserve(n);
    for (int i = 0; i < n; ++i) refs.push_back(orrery::Task(Square).Remote(int64_t(i)));
    int64_t sum = 0;
    for (const auto& v : co_await refs) sum += *v;
    co_return sum;
  }
  // Waits for a gated task; counts itself while in flight.
  orrery::Async<int> AwaitGate(int v, std::string gate) {
    order_.push_back(v);
    Touch(gate + ".started." + std::to_string(v));
    in_flight_.fetch_add(1);
    try {
      int got = *co_await orrery::Task(GatedValue).Remote(v, gate);
      in_flight_.fetch_sub(1);
      co_return got;
    } catch (const orrery::TaskCancelledError&) {
      cancelled_.fetch_add(1);
      in_flight_.fetch_sub(1);
      throw;
    }
  }
  orrery::Async<int> Quick(int v) { co_return v + 1; }
  orrery::Async<void> Fails() {
    co_await orrery::Task(Square).Remote(int64_t(3));
    throw std::runtime_error("failed after a co_await");
  }
  // Waits up to timeout_ms for one of a gated task; returns how many were ready.
  orrery::Async<int> WaitSome(std::string gate, int timeout_ms) {
    std::vector<orrery::ObjectRef<int>> refs{orrery::Task(GatedValue).Remote(1, gate)};
    auto r = co_await orrery::WaitAsync(refs, 1, timeout_ms);
    co_return int(r.ready.size());
  }
  // Waits for a gated task in a plain (blocking) Get: holds the actor meanwhile.
  orrery::Async<int> BlockingGet(int v, std::string gate) {
    Touch(gate + ".entered");
    int got = *orrery::Get(orrery::Task(GatedValue).Remote(v, gate), 120000);
    co_return got;
  }
  // Waits in a plain Get on a call to its own actor, which cannot start meanwhile.
  orrery::Async<int> BlockingGetOnSelf(orrery::ActorHandle<Gatherer> self) {
    int got = *orrery::Get(self.Task(&Gatherer::Quick).Remote(1), 120000);
    co_return got;
  }
  // Reads its store-kept arguments after a co_await: they stay valid while it is suspended.
  orrery::Async<uint64_t> SumAfterAwait(orrery::Buffer b, std::vector<uint8_t> v) {
    co_await orrery::Task(Square).Remote(int64_t(2));
    uint64_t sum = 0;
    for (size_t i = 0; i < b.size(); ++i) sum += uint8_t(b.data()[i]);
    for (uint8_t x : v) sum += x;
    co_return sum;
  }
  int InFlight() { return in_flight_.load(); }
  int Cancelled() { return cancelled_.load(); }
  int Threads() { return ThreadsOfThisProcess(); }
  std::vector<int> Order() { return order_; }

 private:
  std::atomic<int> in_flight_{0};
  std::atomic<int> cancelled_{0};
  std::vector<int> order_;
};

ORRERY_REMOTE(Square, GatedValue, Gatherer::Create, &Gatherer::SumOfSquares, &Gatherer::AwaitGate,
              &Gatherer::Quick, &Gatherer::Fails, &Gatherer::WaitSome, &Gatherer::InFlight,
              &Gatherer::Cancelled, &Gatherer::Threads, &Gatherer::Order, &Gatherer::BlockingGet,
              &Gatherer::BlockingGetOnSelf, &Gatherer::SumAfterAwait);

TEST(AsyncActorTest, GathersTenThousandTaskResultsOnFewThreads) {
  ActorReaper reaper;
  auto actor = reaper.Add(orrery::Actor(Gatherer::Create).Remote());
  const int n = 10000;
  int64_t want = 0;
  for (int64_t i = 0; i < n; ++i) want += i * i;
  EXPECT_EQ(*orrery::Get(actor.Task(&Gatherer::SumOfSquares).Remote(n), 300000), want);
  int threads = *orrery::Get(actor.Task(&Gatherer::Threads).Remote(), kGetTimeoutMs);
  EXPECT_LT(threads, 20) << "the actor's process has " << threads << " threads";
}

TEST(AsyncActorTest, StoreKeptArgumentsOutliveTheCallsSuspensions) {
  ActorReaper reaper;
  auto actor = reaper.Add(orrery::Actor(Gatherer::Create).Remote());
  std::vector<orrery::ObjectRef<uint64_t>> calls;
  std::vector<uint64_t> want;
  for (int i = 0; i < 8; ++i) {
    std::vector<uint8_t> bytes(1 << 20, uint8_t(i + 1));  // above the inline limit: in the store
    want.push_back(2 * uint64_t(i + 1) * bytes.size());
    calls.push_back(actor.Task(&Gatherer::SumAfterAwait).Remote(orrery::Buffer(bytes), bytes));
  }
  for (int i = 0; i < 8; ++i) EXPECT_EQ(*orrery::Get(calls[i], kGetTimeoutMs), want[i]) << i;
}

TEST(AsyncActorTest, ADefaultActorInterleavesOnlyAtACoAwait) {
  ActorReaper reaper;
  TempMarker gate;
  auto actor = reaper.Add(orrery::Actor(Gatherer::Create).Remote());
  auto waiting = actor.Task(&Gatherer::AwaitGate).Remote(7, gate.path());
  // The first call is suspended at its co_await: the next ones run meanwhile.
  EXPECT_EQ(*orrery::Get(actor.Task(&Gatherer::Quick).Remote(1), kGetTimeoutMs), 2);
  EXPECT_EQ(*orrery::Get(actor.Task(&Gatherer::InFlight).Remote(), kGetTimeoutMs), 1);
  EXPECT_EQ(orrery::Wait(std::vector{waiting}, 1, 0).ready.size(), 0u);
  Touch(gate.path());
  EXPECT_EQ(*orrery::Get(waiting, kGetTimeoutMs), 7);
  std::remove((gate.path() + ".started.7").c_str());
}

// A plain Get inside a coroutine blocks the actor's call loop, as a blocking call in an
// event loop does: no other call of the actor runs until it returns (the guarantee that a
// call runs alone between two co_awaits), and one on a call to its own actor fails fast.
TEST(AsyncActorTest, APlainGetInsideACoroutineHoldsTheActor) {
  ActorReaper reaper;
  TempMarker gate;
  auto actor = reaper.Add(orrery::Actor(Gatherer::Create).Remote());
  auto blocked = actor.Task(&Gatherer::BlockingGet).Remote(5, gate.path());
  ASSERT_TRUE(WaitFor([&] { return Exists(gate.path() + ".entered"); }));
  auto quick = actor.Task(&Gatherer::Quick).Remote(1);
  EXPECT_FALSE(WaitFor([&] { return orrery::Wait(std::vector{quick}, 1, 0).ready.size() == 1; },
                       std::chrono::milliseconds(500)))
      << "a call ran while another waited in a plain Get inside its coroutine";
  Touch(gate.path());
  EXPECT_EQ(*orrery::Get(blocked, kGetTimeoutMs), 5);
  EXPECT_EQ(*orrery::Get(quick, kGetTimeoutMs), 2);
  std::remove((gate.path() + ".entered").c_str());
  try {
    orrery::Get(actor.Task(&Gatherer::BlockingGetOnSelf).Remote(actor), kGetTimeoutMs);
    ADD_FAILURE() << "a coroutine waiting in a plain Get on its own actor returned";
  } catch (const orrery::RemoteError& e) {
    EXPECT_NE(std::string(e.what()).find("would wait forever"), std::string::npos) << e.what();
  }
  EXPECT_EQ(*orrery::Get(actor.Task(&Gatherer::Quick).Remote(2), kGetTimeoutMs), 3);
}

TEST(AsyncActorTest, MaxConcurrencyBoundsTheCallsInFlight) {
  ActorReaper reaper;
  TempMarker gate;
  auto actor = reaper.Add(orrery::Actor(Gatherer::Create).SetMaxConcurrency(2).Remote());
  std::vector<orrery::ObjectRef<int>> calls;
  for (int i = 0; i < 5; ++i)
    calls.push_back(actor.Task(&Gatherer::AwaitGate).Remote(i, gate.path()));
  // Started calls mark themselves (the actor's other calls queue behind the third).
  auto started = [&] {
    int n = 0;
    for (int i = 0; i < 5; ++i) n += Exists(gate.path() + ".started." + std::to_string(i));
    return n;
  };
  bool two = WaitFor([&] { return started() == 2; });
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  int most = started();
  while (std::chrono::steady_clock::now() < until) most = std::max(most, started());
  Touch(gate.path());  // before any assertion: the gated tasks end either way
  ASSERT_TRUE(two);
  EXPECT_EQ(most, 2);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(*orrery::Get(calls[i], kGetTimeoutMs), i);
  // They started in submission order.
  EXPECT_EQ(*orrery::Get(actor.Task(&Gatherer::Order).Remote(), kGetTimeoutMs),
            (std::vector<int>{0, 1, 2, 3, 4}));
  for (int i = 0; i < 5; ++i) std::remove((gate.path() + ".started." + std::to_string(i)).c_str());
}

TEST(AsyncActorTest, CancelReachesASuspendedCall) {
  ActorReaper reaper;
  TempMarker gate;  // never opened
  auto actor = reaper.Add(orrery::Actor(Gatherer::Create).Remote());
  auto waiting = actor.Task(&Gatherer::AwaitGate).Remote(1, gate.path());
  ASSERT_TRUE(WaitFor(
      [&] { return *orrery::Get(actor.Task(&Gatherer::InFlight).Remote(), kGetTimeoutMs) == 1; }));
  orrery::Cancel(waiting);
  EXPECT_THROW(orrery::Get(waiting, kGetTimeoutMs), orrery::TaskCancelledError);
  // The coroutine itself saw the cancellation at its co_await.
  EXPECT_TRUE(WaitFor(
      [&] { return *orrery::Get(actor.Task(&Gatherer::Cancelled).Remote(), kGetTimeoutMs) == 1; }));
  EXPECT_EQ(*orrery::Get(actor.Task(&Gatherer::InFlight).Remote(), kGetTimeoutMs), 0);
  Touch(gate.path());  // lets the gated task end
  std::remove((gate.path() + ".started.1").c_str());
}

TEST(AsyncActorTest, AnErrorAfterACoAwaitReachesTheCaller) {
  ActorReaper reaper;
  auto actor = reaper.Add(orrery::Actor(Gatherer::Create).Remote());
  try {
    orrery::Get(actor.Task(&Gatherer::Fails).Remote(), kGetTimeoutMs);
    FAIL() << "the method's error was not thrown";
  } catch (const orrery::RemoteError& e) {
    EXPECT_NE(std::string(e.what()).find("failed after a co_await"), std::string::npos);
  }
  EXPECT_EQ(*orrery::Get(actor.Task(&Gatherer::Quick).Remote(4), kGetTimeoutMs), 5);
}

TEST(AsyncActorTest, WaitAsyncReturnsAtItsTimeout) {
  ActorReaper reaper;
  TempMarker gate;
  auto actor = reaper.Add(orrery::Actor(Gatherer::Create).Remote());
  EXPECT_EQ(*orrery::Get(actor.Task(&Gatherer::WaitSome).Remote(gate.path(), 100), kGetTimeoutMs),
            0);
  Touch(gate.path());
  EXPECT_EQ(*orrery::Get(actor.Task(&Gatherer::WaitSome).Remote(gate.path(), 60000), kGetTimeoutMs),
            1);
}

}  // namespace
