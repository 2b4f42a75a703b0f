// Named actors: SetName + GetActor, namespaces, lookups from inside workers, names freed
// when the actor dies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "remote_functions.h"
#include "test_support.h"

namespace {

using orrery_test::kGetTimeoutMs;

TEST(NamedActorTest, GetActorFindsTheNamedActor) {
  orrery_test::ActorReaper reaper;
  auto c = reaper.Add(orrery::Actor(Counter::Create).SetName("named_counter").Remote(10));
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 11);

  std::optional<orrery::ActorHandle<Counter>> found = orrery::GetActor<Counter>("named_counter");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->ID(), c.ID());
  EXPECT_EQ(*orrery::Get(found->Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 12)
      << "the handle reaches the same instance";
}

TEST(NamedActorTest, NameResolvesAsSoonAsRemoteReturns) {
  // As in Ray, creating a named actor registers the name before Remote() returns, so a
  // lookup right after it cannot miss.
  orrery_test::ActorReaper reaper;
  auto c = reaper.Add(orrery::Actor(Counter::Create).SetName("instant_name").Remote(3));
  std::optional<orrery::ActorHandle<Counter>> found = orrery::GetActor<Counter>("instant_name");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->ID(), c.ID());
  EXPECT_EQ(*orrery::Get(found->Task(&Counter::Value).Remote(), kGetTimeoutMs), 3);
}

TEST(NamedActorTest, MissingNameIsNullopt) {
  EXPECT_FALSE(orrery::GetActor<Counter>("no_actor_has_this_name").has_value());
  EXPECT_FALSE(orrery::GetActor<Counter>("no_actor_has_this_name", "some_namespace").has_value());
}

TEST(NamedActorTest, NamespacesSeparateNames) {
  orrery_test::ActorReaper reaper;
  auto one = reaper.Add(orrery::Actor(Counter::Create).SetName("ns_counter", "ns_one").Remote(1));
  auto two = reaper.Add(orrery::Actor(Counter::Create).SetName("ns_counter", "ns_two").Remote(2));
  EXPECT_EQ(*orrery::Get(one.Task(&Counter::Value).Remote(), kGetTimeoutMs), 1);
  EXPECT_EQ(*orrery::Get(two.Task(&Counter::Value).Remote(), kGetTimeoutMs), 2);

  auto found_one = orrery::GetActor<Counter>("ns_counter", "ns_one");
  auto found_two = orrery::GetActor<Counter>("ns_counter", "ns_two");
  ASSERT_TRUE(found_one.has_value());
  ASSERT_TRUE(found_two.has_value());
  EXPECT_EQ(found_one->ID(), one.ID());
  EXPECT_EQ(found_two->ID(), two.ID());
  EXPECT_EQ(*orrery::Get(found_two->Task(&Counter::Value).Remote(), kGetTimeoutMs), 2);

  EXPECT_FALSE(orrery::GetActor<Counter>("ns_counter").has_value())
      << "not visible from the job's own namespace";
  EXPECT_FALSE(orrery::GetActor<Counter>("ns_counter", "ns_three").has_value());
}

TEST(NamedActorTest, DuplicateLiveNameIsRejected) {
  orrery_test::ActorReaper reaper;
  auto first = reaper.Add(orrery::Actor(Counter::Create).SetName("unique_name").Remote(1));
  EXPECT_EQ(*orrery::Get(first.Task(&Counter::Value).Remote(), kGetTimeoutMs), 1);
  bool rejected = false;
  try {
    auto second = reaper.Add(orrery::Actor(Counter::Create).SetName("unique_name").Remote(2));
    orrery::Get(second.Task(&Counter::Value).Remote(), kGetTimeoutMs);
  } catch (const orrery::GetTimeoutError&) {
    ADD_FAILURE() << "a duplicate name must fail, not hang";
  } catch (const orrery::Error&) {
    rejected = true;
  }
  EXPECT_TRUE(rejected) << "two live actors got the name 'unique_name'";
  auto found = orrery::GetActor<Counter>("unique_name");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->ID(), first.ID()) << "the name still belongs to the first actor";
}

TEST(NamedActorTest, NameIsFreedWhenTheActorIsKilled) {
  orrery_test::ActorReaper reaper;
  auto c = reaper.Add(orrery::Actor(Counter::Create).SetName("short_lived").Remote(0));
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Value).Remote(), kGetTimeoutMs), 0);
  ASSERT_TRUE(orrery::GetActor<Counter>("short_lived").has_value());
  c.Kill();
  EXPECT_TRUE(orrery_test::WaitFor([] {
    return !orrery::GetActor<Counter>("short_lived").has_value();
  })) << "a dead actor's name still resolves";
  auto again = reaper.Add(orrery::Actor(Counter::Create).SetName("short_lived").Remote(5));
  EXPECT_EQ(*orrery::Get(again.Task(&Counter::Value).Remote(), kGetTimeoutMs), 5);
  auto found = orrery::GetActor<Counter>("short_lived");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->ID(), again.ID());
}

TEST(NamedActorTest, WorkersCanLookUpNamedActors) {
  orrery_test::ActorReaper reaper;
  auto c = reaper.Add(orrery::Actor(Counter::Create).SetName("worker_visible").Remote(0));
  EXPECT_EQ(
      *orrery::Get(orrery::Task(IncNamed).Remote(std::string("worker_visible"), std::string(), 3),
                   kGetTimeoutMs),
      3);
  EXPECT_EQ(*orrery::Get(orrery::Task(IncNamed).Remote(std::string("not_there"), std::string(), 3),
                         kGetTimeoutMs),
            -1);
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Value).Remote(), kGetTimeoutMs), 3);
}

}  // namespace
