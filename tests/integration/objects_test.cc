// Objects: Put and Get, Wait's ready/unready split, and ObjectRefs passed as arguments
// (top level, produced by other tasks, and nested inside values).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "remote_functions.h"
#include "test_support.h"

namespace {

using orrery_test::kGetTimeoutMs;
using ::testing::ElementsAre;

// A gate actor and a call blocked on it: a ref that stays unready until Open().
struct BlockedRef {
  orrery_test::ActorReaper reaper;
  orrery::ActorHandle<Gate> gate;
  orrery::ObjectRef<int> ref;
  explicit BlockedRef(int value) {
    gate = reaper.Add(orrery::Actor(Gate::Create).SetMaxConcurrency(4).Remote());
    ref = gate.Task(&Gate::WaitOpen).Remote(value, kGetTimeoutMs);
  }
  void Open() { orrery::Get(gate.Task(&Gate::Open).Remote(), kGetTimeoutMs); }
};

TEST(ObjectTest, PutAndGet) {
  orrery::ObjectRef<int> i = orrery::Put(42);
  EXPECT_FALSE(i.ID().IsNil());
  EXPECT_EQ(*orrery::Get(i, kGetTimeoutMs), 42);
  EXPECT_EQ(*i.Get(), 42);
  EXPECT_EQ(*orrery::Get(orrery::Put(std::string("hello")), kGetTimeoutMs), "hello");
  EXPECT_THAT(*orrery::Get(orrery::Put(std::vector<int>{3, 2, 1}), kGetTimeoutMs),
              ElementsAre(3, 2, 1));
  EXPECT_EQ(*orrery::Get(orrery::Put(Point{5, 6}), kGetTimeoutMs), (Point{5, 6}));
  EXPECT_NE(orrery::Put(1).ID(), orrery::Put(1).ID()) << "every Put is a new object";
}

TEST(ObjectTest, PutRefAsTaskArgument) {
  orrery::ObjectRef<int> forty = orrery::Put(40);
  EXPECT_EQ(*orrery::Get(orrery::Task(Add).Remote(forty, 2), kGetTimeoutMs), 42);
  EXPECT_EQ(*orrery::Get(orrery::Task(Add).Remote(forty, forty), kGetTimeoutMs), 80);
  EXPECT_EQ(
      *orrery::Get(orrery::Task(Echo).Remote(orrery::Put(std::string("via ref"))), kGetTimeoutMs),
      "via ref");
}

TEST(ObjectTest, TaskResultAsArgumentOfAnotherTask) {
  auto three = orrery::Task(Add).Remote(1, 2);
  auto thirteen = orrery::Task(Add).Remote(three, 10);
  auto twenty_six = orrery::Task(Add).Remote(thirteen, thirteen);
  EXPECT_EQ(*orrery::Get(twenty_six, kGetTimeoutMs), 26);
}

TEST(ObjectTest, DependencyIsResolvedBeforeTheCallRuns) {
  BlockedRef blocked(5);
  auto dependent = orrery::Task(Add).Remote(blocked.ref, 10);
  // While the argument does not exist the dependent call cannot have produced a value.
  orrery::WaitResult<int> w = orrery::Wait(std::vector<orrery::ObjectRef<int>>{dependent}, 1, 200);
  EXPECT_TRUE(w.ready.empty());
  ASSERT_EQ(w.unready.size(), 1u);
  blocked.Open();
  EXPECT_EQ(*orrery::Get(dependent, kGetTimeoutMs), 15);
}

TEST(ObjectTest, RefsInsideValuesAreFetchedByTheReceiver) {
  std::vector<orrery::ObjectRef<int>> refs{orrery::Put(1), orrery::Task(Add).Remote(2, 3),
                                           orrery::Put(100)};
  EXPECT_EQ(*orrery::Get(orrery::Task(SumRefs).Remote(refs), kGetTimeoutMs), 106);
}

TEST(ObjectTest, RefArgumentThatFailedPropagatesTheError) {
  auto failed = orrery::Task(ThrowInvalidArgument).Remote(std::string("upstream failure"));
  auto dependent = orrery::Task(Add).Remote(failed, 1);
  EXPECT_THROW(orrery::Get(dependent, kGetTimeoutMs), orrery::Error);
}

TEST(ObjectTest, WaitSplitsReadyAndUnready) {
  BlockedRef blocked(9);
  auto put = orrery::Put(1);
  auto task = orrery::Task(Add).Remote(2, 3);
  std::vector<orrery::ObjectRef<int>> refs{put, blocked.ref, task};

  // Two of three can be ready; the third cannot until the gate opens.
  orrery::WaitResult<int> w = orrery::Wait(refs, 2, kGetTimeoutMs);
  ASSERT_EQ(w.ready.size(), 2u);
  ASSERT_EQ(w.unready.size(), 1u);
  EXPECT_TRUE(w.ready[0] == put) << "order within ready follows refs";
  EXPECT_TRUE(w.ready[1] == task);
  EXPECT_TRUE(w.unready[0] == blocked.ref);

  // Asking for all three times out with the same split.
  w = orrery::Wait(refs, 3, 200);
  EXPECT_EQ(w.ready.size(), 2u);
  ASSERT_EQ(w.unready.size(), 1u);
  EXPECT_TRUE(w.unready[0] == blocked.ref);

  // Asking for one returns no more than one.
  w = orrery::Wait(refs, 1, kGetTimeoutMs);
  EXPECT_EQ(w.ready.size(), 1u);
  EXPECT_EQ(w.ready.size() + w.unready.size(), refs.size());

  blocked.Open();
  w = orrery::Wait(refs, 3, kGetTimeoutMs);
  EXPECT_EQ(w.ready.size(), 3u);
  EXPECT_TRUE(w.unready.empty());
  EXPECT_EQ(*orrery::Get(blocked.ref, kGetTimeoutMs), 9);
}

TEST(ObjectTest, FailedObjectsCountAsReady) {
  auto failed = orrery::Task(ThrowInvalidArgument).Remote(std::string("ready, but an error"));
  orrery::WaitResult<int> w =
      orrery::Wait(std::vector<orrery::ObjectRef<int>>{failed}, 1, kGetTimeoutMs);
  ASSERT_EQ(w.ready.size(), 1u) << "an error is a result: Wait must not block on it";
  EXPECT_THROW(orrery::Get(w.ready[0], kGetTimeoutMs), orrery::RemoteError);
}

TEST(ObjectTest, WaitWithZeroTimeoutDoesNotBlock) {
  BlockedRef blocked(1);
  std::vector<orrery::ObjectRef<int>> refs{blocked.ref};
  orrery::WaitResult<int> w = orrery::Wait(refs, 1, 0);
  EXPECT_TRUE(w.ready.empty());
  EXPECT_EQ(w.unready.size(), 1u);
}

}  // namespace
