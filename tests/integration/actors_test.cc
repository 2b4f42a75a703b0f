// Actors against real worker processes: creation, state, call order, ObjectRef and handle
// arguments, nested Gets inside methods, concurrency, errors, Kill and failed creation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <numeric>
#include <string>
#include <vector>

#include "remote_functions.h"
#include "test_support.h"

namespace {

using orrery_test::kGetTimeoutMs;
using ::testing::HasSubstr;

TEST(ActorTest, CreateAndCall) {
  orrery_test::ActorReaper reaper;
  orrery::ActorHandle<Counter> c = reaper.Add(orrery::Actor(Counter::Create).Remote(5));
  EXPECT_FALSE(c.ID().IsNil());
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 6);
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Inc).Remote(2), kGetTimeoutMs), 8);
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Value).Remote(), kGetTimeoutMs), 8);
  EXPECT_EQ(*c.Task(&Counter::Value).Remote().Get(), 8);
}

TEST(ActorTest, EachActorHasItsOwnStateAndProcess) {
  orrery_test::ActorReaper reaper;
  auto a = reaper.Add(orrery::Actor(Counter::Create).Remote(0));
  auto b = reaper.Add(orrery::Actor(Counter::Create).Remote(100));
  EXPECT_NE(a.ID(), b.ID());
  EXPECT_EQ(*orrery::Get(a.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 1);
  EXPECT_EQ(*orrery::Get(b.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 101);
  int pid_a = *orrery::Get(a.Task(&Counter::Pid).Remote(), kGetTimeoutMs);
  int pid_b = *orrery::Get(b.Task(&Counter::Pid).Remote(), kGetTimeoutMs);
  EXPECT_NE(pid_a, int(getpid()));
  EXPECT_NE(pid_a, pid_b);
  EXPECT_EQ(*orrery::Get(a.Task(&Counter::Pid).Remote(), kGetTimeoutMs), pid_a)
      << "an actor stays in its process";
}

TEST(ActorTest, CallsFromOneCallerRunInSubmissionOrder) {
  orrery_test::ActorReaper reaper;
  auto log = reaper.Add(orrery::Actor(Log::Create).Remote());
  constexpr int kCalls = 200;
  std::vector<orrery::ObjectRef<int>> refs;
  for (int i = 0; i < kCalls; ++i) refs.push_back(log.Task(&Log::Append).Remote(i));
  std::vector<std::shared_ptr<int>> lengths = orrery::Get(refs, kGetTimeoutMs);
  for (int i = 0; i < kCalls; ++i) EXPECT_EQ(*lengths[i], i + 1) << "call " << i;
  std::vector<int> expected(kCalls);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(*orrery::Get(log.Task(&Log::Items).Remote(), kGetTimeoutMs), expected);
}

TEST(ActorTest, ObjectRefArguments) {
  orrery_test::ActorReaper reaper;
  auto c = reaper.Add(orrery::Actor(Counter::Create).Remote(0));
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Inc).Remote(orrery::Put(5)), kGetTimeoutMs), 5);
  auto three = orrery::Task(Add).Remote(1, 2);
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Inc).Remote(three), kGetTimeoutMs), 8);
  // A ref to another actor's result.
  auto other = reaper.Add(orrery::Actor(Counter::Create).Remote(1000));
  auto thousand_and_one = other.Task(&Counter::Inc).Remote(1);
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Inc).Remote(thousand_and_one), kGetTimeoutMs), 1009);
  // Constructor arguments may be refs too.
  auto from_ref = reaper.Add(orrery::Actor(Counter::Create).Remote(orrery::Put(77)));
  EXPECT_EQ(*orrery::Get(from_ref.Task(&Counter::Value).Remote(), kGetTimeoutMs), 77);
}

TEST(ActorTest, CallWaitsForItsRefArgumentWithoutBreakingOrder) {
  orrery_test::ActorReaper reaper;
  auto gate = reaper.Add(orrery::Actor(Gate::Create).SetMaxConcurrency(4).Remote());
  auto log = reaper.Add(orrery::Actor(Log::Create).Remote());
  auto later = gate.Task(&Gate::WaitOpen).Remote(1, kGetTimeoutMs);
  auto first = log.Task(&Log::Append).Remote(later);  // waits for the gate
  auto second = log.Task(&Log::Append).Remote(2);
  orrery::Get(gate.Task(&Gate::Open).Remote(), kGetTimeoutMs);
  EXPECT_EQ(*orrery::Get(first, kGetTimeoutMs), 1);
  EXPECT_EQ(*orrery::Get(second, kGetTimeoutMs), 2);
  EXPECT_EQ(*orrery::Get(log.Task(&Log::Items).Remote(), kGetTimeoutMs), (std::vector<int>{1, 2}));
}

TEST(ActorTest, HandlesCanBePassedToTasksAndActors) {
  orrery_test::ActorReaper reaper;
  auto c = reaper.Add(orrery::Actor(Counter::Create).Remote(10));
  EXPECT_EQ(*orrery::Get(orrery::Task(IncViaTask).Remote(c, 5), kGetTimeoutMs), 15);
  auto caller = reaper.Add(orrery::Actor(Caller::Create).Remote());
  EXPECT_EQ(*orrery::Get(caller.Task(&Caller::IncOther).Remote(c, 1), kGetTimeoutMs), 16);
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Value).Remote(), kGetTimeoutMs), 16)
      << "all callers reached the same actor";
}

TEST(ActorTest, GetInsideAMethodDoesNotDeadlock) {
  orrery_test::ActorReaper reaper;
  auto caller = reaper.Add(orrery::Actor(Caller::Create).Remote());
  EXPECT_EQ(*orrery::Get(caller.Task(&Caller::AddViaTask).Remote(2, 3), kGetTimeoutMs), 5);
  auto c = reaper.Add(orrery::Actor(Counter::Create).Remote(0));
  // Several nested calls queued on the same (max_concurrency 1) actor.
  std::vector<orrery::ObjectRef<int>> refs;
  for (int i = 0; i < 5; ++i) refs.push_back(caller.Task(&Caller::IncOther).Remote(c, 1));
  std::vector<std::shared_ptr<int>> values = orrery::Get(refs, kGetTimeoutMs);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(*values[i], i + 1);
  // Refs handed to the method are fetched by the worker from their owner (this driver).
  std::vector<orrery::ObjectRef<int>> inner{orrery::Put(3), orrery::Task(Add).Remote(4, 5)};
  EXPECT_EQ(*orrery::Get(caller.Task(&Caller::WaitForRef).Remote(inner), kGetTimeoutMs), 12);
}

TEST(ActorTest, MaxConcurrencyRunsCallsAtTheSameTime) {
  orrery_test::ActorReaper reaper;
  for (int n : {2, 4}) {
    auto barrier = reaper.Add(orrery::Actor(Barrier::Create).SetMaxConcurrency(n).Remote());
    std::vector<orrery::ObjectRef<bool>> refs;
    // Each call returns true only if all n are inside the actor at once.
    for (int i = 0; i < n; ++i) refs.push_back(barrier.Task(&Barrier::Arrive).Remote(n, 30000));
    std::vector<std::shared_ptr<bool>> met = orrery::Get(refs, kGetTimeoutMs);
    for (int i = 0; i < n; ++i)
      EXPECT_TRUE(*met[i]) << "n=" << n << " call " << i << " waited alone";
  }
}

TEST(ActorTest, DefaultConcurrencyRunsOneCallAtATime) {
  orrery_test::ActorReaper reaper;
  auto barrier = reaper.Add(orrery::Actor(Barrier::Create).Remote());
  auto first = barrier.Task(&Barrier::Arrive).Remote(2, 300);
  auto second = barrier.Task(&Barrier::Arrive).Remote(2, 300);
  // Run one after the other, the first call can never see the second arrive.
  EXPECT_FALSE(*orrery::Get(first, kGetTimeoutMs));
  EXPECT_TRUE(*orrery::Get(second, kGetTimeoutMs));
}

TEST(ActorTest, MethodExceptionIsRemoteErrorAndTheActorSurvives) {
  orrery_test::ActorReaper reaper;
  auto c = reaper.Add(orrery::Actor(Counter::Create).Remote(1));
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 2);
  try {
    orrery::Get(c.Task(&Counter::Fail).Remote(std::string("method went wrong")), kGetTimeoutMs);
    FAIL() << "expected RemoteError";
  } catch (const orrery::RemoteError& e) {
    EXPECT_THAT(e.type(), HasSubstr("std::runtime_error"));
    EXPECT_THAT(e.message(), HasSubstr("method went wrong"));
    EXPECT_THAT(e.function(), HasSubstr("Fail"));
  }
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 3) << "state kept";
}

TEST(ActorTest, UnregisteredMethodFailsAtSubmission) {
  orrery_test::ActorReaper reaper;
  auto c = reaper.Add(orrery::Actor(Counter::Create).Remote(0));
  EXPECT_THROW(c.Task(&Counter::NotRegisteredMethod).Remote(), orrery::FunctionNotFoundError);
}

TEST(ActorTest, KillMakesLaterCallsFailWithActorDiedError) {
  orrery_test::ActorReaper reaper;
  auto c = reaper.Add(orrery::Actor(Counter::Create).Remote(0));
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 1);
  c.Kill();
  EXPECT_THROW(orrery::Get(c.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), orrery::ActorDiedError);
  EXPECT_THROW(orrery::Get(c.Task(&Counter::Value).Remote(), kGetTimeoutMs),
               orrery::ActorDiedError);
}

TEST(ActorTest, KillFailsCallsInFlight) {
  orrery_test::ActorReaper reaper;
  auto gate = reaper.Add(orrery::Actor(Gate::Create).SetMaxConcurrency(2).Remote());
  auto blocked = gate.Task(&Gate::WaitOpen).Remote(1, kGetTimeoutMs);
  // Make sure the call is running before the kill.
  EXPECT_THROW(orrery::Get(blocked, 200), orrery::GetTimeoutError);
  gate.Kill();
  EXPECT_THROW(orrery::Get(blocked, kGetTimeoutMs), orrery::ActorDiedError);
}

TEST(ActorTest, WorkerCrashIsActorDiedError) {
  orrery_test::ActorReaper reaper;
  auto c = reaper.Add(orrery::Actor(Counter::Create).Remote(0));
  int pid = *orrery::Get(c.Task(&Counter::Pid).Remote(), kGetTimeoutMs);
  EXPECT_THROW(orrery::Get(c.Task(&Counter::Crash).Remote(), kGetTimeoutMs),
               orrery::ActorDiedError);
  EXPECT_THROW(orrery::Get(c.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), orrery::ActorDiedError)
      << "no restarts were allowed";
  EXPECT_TRUE(orrery_test::WaitFor([&] { return orrery_test::ProcessGone(pid); }));
}

TEST(ActorTest, KillWithRestartStartsAFreshInstance) {
  orrery_test::ActorReaper reaper;
  auto c = reaper.Add(orrery::Actor(Counter::Create).SetMaxRestarts(1).Remote(100));
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Inc).Remote(5), kGetTimeoutMs), 105);
  int first_pid = *orrery::Get(c.Task(&Counter::Pid).Remote(), kGetTimeoutMs);
  c.Kill(/*no_restart=*/false);
  // Calls made while it restarts may fail; once it is back it has its initial state.
  int value = -1;
  bool back = orrery_test::WaitFor([&] {
    try {
      value = *orrery::Get(c.Task(&Counter::Value).Remote(), kGetTimeoutMs);
      return true;
    } catch (const orrery::ActorDiedError&) {
      return false;
    }
  });
  ASSERT_TRUE(back) << "the actor was not restarted";
  EXPECT_EQ(value, 100);
  EXPECT_NE(*orrery::Get(c.Task(&Counter::Pid).Remote(), kGetTimeoutMs), first_pid);
  c.Kill();
  EXPECT_THROW(orrery::Get(c.Task(&Counter::Value).Remote(), kGetTimeoutMs),
               orrery::ActorDiedError);
}

TEST(ActorTest, CrashedCallIsRetriedOnTheRestartedActor) {
  orrery_test::ActorReaper reaper;
  orrery_test::TempMarker marker;
  auto c =
      reaper.Add(orrery::Actor(Counter::Create).SetMaxRestarts(1).SetMaxTaskRetries(1).Remote(50));
  int first_pid = *orrery::Get(c.Task(&Counter::Pid).Remote(), kGetTimeoutMs);
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::CrashOnce).Remote(marker.path()), kGetTimeoutMs), 50)
      << "the call that crashed the first instance runs again on the second";
  EXPECT_NE(*orrery::Get(c.Task(&Counter::Pid).Remote(), kGetTimeoutMs), first_pid);
}

TEST(ActorTest, FactoryExceptionKillsTheActorWithItsMessage) {
  auto faulty = orrery::Actor(Faulty::Create).Remote(std::string("factory exploded 31337"));
  try {
    orrery::Get(faulty.Task(&Faulty::Ping).Remote(), kGetTimeoutMs);
    FAIL() << "expected ActorDiedError";
  } catch (const orrery::ActorDiedError& e) {
    EXPECT_THAT(e.what(), HasSubstr("factory exploded 31337"));
  }
  EXPECT_THROW(orrery::Get(faulty.Task(&Faulty::Ping).Remote(), kGetTimeoutMs),
               orrery::ActorDiedError);
}

TEST(ActorTest, ManyActorsAtOnce) {
  orrery_test::ActorReaper reaper;
  std::vector<orrery::ActorHandle<Counter>> counters;
  for (int i = 0; i < 6; ++i)
    counters.push_back(reaper.Add(orrery::Actor(Counter::Create).Remote(i)));
  std::vector<orrery::ObjectRef<int>> refs;
  for (auto& c : counters) refs.push_back(c.Task(&Counter::Inc).Remote(10));
  std::vector<std::shared_ptr<int>> values = orrery::Get(refs, kGetTimeoutMs);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(*values[i], i + 10);
}

}  // namespace
