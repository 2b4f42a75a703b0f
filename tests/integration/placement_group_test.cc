// Placement groups on the single embedded node: reservation, scheduling into bundles,
// removal, strategies that cannot be met and bad bundles.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "orrery/resources.h"
#include "remote_functions.h"
#include "test_support.h"

namespace {

using orrery_test::AvailableCpu;
using orrery_test::kGetTimeoutMs;
using orrery_test::kTestCpus;
using orrery_test::ResourceOr0;
using orrery_test::WaitFor;

// Removes the group when the test ends, pass or fail.
struct PgRemover {
  orrery::PlacementGroupId id;
  ~PgRemover() {
    try {
      if (!id.IsNil()) orrery::RemovePlacementGroup(id);
    } catch (...) {
    }
  }
};

TEST(PlacementGroupTest, PackGroupIsReadyAndHostsActors) {
  ASSERT_TRUE(WaitFor([] { return AvailableCpu() == kTestCpus; }));
  orrery::PlacementGroup pg =
      orrery::CreatePlacementGroup({.name = "pg_pack",
                                    .bundles = {{{"CPU", 1}}, {{"CPU", 1}}},
                                    .strategy = orrery::PlacementStrategy::PACK});
  PgRemover remover{pg.Id()};
  EXPECT_FALSE(pg.Empty());
  EXPECT_EQ(pg.Name(), "pg_pack");
  EXPECT_EQ(pg.Bundles().size(), 2u);
  EXPECT_EQ(pg.Strategy(), orrery::PlacementStrategy::PACK);
  ASSERT_TRUE(pg.Wait(30));

  // The reservation is taken out of what other work can use.
  EXPECT_TRUE(WaitFor([] { return AvailableCpu() == kTestCpus - 2; })) << AvailableCpu();

  auto found = orrery::GetPlacementGroup("pg_pack");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->Id(), pg.Id());

  orrery_test::ActorReaper reaper;
  auto a = reaper.Add(
      orrery::Actor(Counter::Create).SetResources({{"CPU", 1}}).SetPlacementGroup(pg, 0).Remote(1));
  auto b = reaper.Add(
      orrery::Actor(Counter::Create).SetResources({{"CPU", 1}}).SetPlacementGroup(pg, 1).Remote(2));
  EXPECT_EQ(*orrery::Get(a.Task(&Counter::Inc).Remote(10), kGetTimeoutMs), 11);
  EXPECT_EQ(*orrery::Get(b.Task(&Counter::Inc).Remote(10), kGetTimeoutMs), 12);
  // Actors inside the group use the reservation, not the rest of the node.
  EXPECT_EQ(AvailableCpu(), kTestCpus - 2);

  a.Kill();
  b.Kill();
  orrery::RemovePlacementGroup(pg.Id());
  remover.id = orrery::PlacementGroupId();
  EXPECT_TRUE(WaitFor([] { return AvailableCpu() == kTestCpus; }))
      << "removing the group did not return its CPUs: " << AvailableCpu();
  EXPECT_TRUE(WaitFor([] { return !orrery::GetPlacementGroup("pg_pack").has_value(); }));
}

TEST(PlacementGroupTest, AnyBundleIndexSchedulesIntoTheGroup) {
  orrery::PlacementGroup pg = orrery::CreatePlacementGroup(
      {.name = "pg_any", .bundles = {{{"CPU", 2}}}, .strategy = orrery::PlacementStrategy::PACK});
  PgRemover remover{pg.Id()};
  ASSERT_TRUE(pg.Wait(30));
  orrery_test::ActorReaper reaper;
  auto a = reaper.Add(
      orrery::Actor(Counter::Create).SetResources({{"CPU", 1}}).SetPlacementGroup(pg).Remote(3));
  EXPECT_EQ(*orrery::Get(a.Task(&Counter::Value).Remote(), kGetTimeoutMs), 3);
  // Tasks can use a group too (the bundle has a CPU left beside the actor's).
  EXPECT_EQ(
      *orrery::Get(
          orrery::Task(Add).SetResources({{"CPU", 0.5}}).SetPlacementGroup(pg, 0).Remote(1, 2),
          kGetTimeoutMs),
      3);
}

TEST(PlacementGroupTest, StrictPackOnOneNodeIsReady) {
  orrery::PlacementGroup pg =
      orrery::CreatePlacementGroup({.name = "pg_strict_pack",
                                    .bundles = {{{"CPU", 1}}, {{"CPU", 1}}, {{"Custom", 1}}},
                                    .strategy = orrery::PlacementStrategy::STRICT_PACK});
  PgRemover remover{pg.Id()};
  EXPECT_TRUE(pg.Wait(30));
}

TEST(PlacementGroupTest, SoftSpreadFallsBackToOneNode) {
  orrery::PlacementGroup pg =
      orrery::CreatePlacementGroup({.name = "pg_spread",
                                    .bundles = {{{"CPU", 1}}, {{"CPU", 1}}},
                                    .strategy = orrery::PlacementStrategy::SPREAD});
  PgRemover remover{pg.Id()};
  EXPECT_TRUE(pg.Wait(30));
}

TEST(PlacementGroupTest, StrictSpreadNeedsAsManyNodesAsBundles) {
  orrery::PlacementGroup pg =
      orrery::CreatePlacementGroup({.name = "pg_strict_spread",
                                    .bundles = {{{"CPU", 1}}, {{"CPU", 1}}},
                                    .strategy = orrery::PlacementStrategy::STRICT_SPREAD});
  PgRemover remover{pg.Id()};
  EXPECT_FALSE(pg.Wait(1.0)) << "two bundles on distinct nodes of a one-node cluster";
}

TEST(PlacementGroupTest, BundleBiggerThanTheNodeStaysPending) {
  orrery::PlacementGroup pg =
      orrery::CreatePlacementGroup({.name = "pg_too_big",
                                    .bundles = {{{"CPU", 1000}}},
                                    .strategy = orrery::PlacementStrategy::PACK});
  PgRemover remover{pg.Id()};
  EXPECT_FALSE(pg.Wait(1.0));
  EXPECT_FALSE(pg.Wait(0.1)) << "still pending";
  orrery::RemovePlacementGroup(pg.Id());
  remover.id = orrery::PlacementGroupId();
  // Nothing was reserved, nothing leaks.
  EXPECT_TRUE(WaitFor([] { return AvailableCpu() == kTestCpus; }));
}

TEST(PlacementGroupTest, BadBundlesAreConfigErrors) {
  EXPECT_THROW(orrery::CreatePlacementGroup({.name = "pg_empty", .bundles = {}}),
               orrery::ConfigError);
  EXPECT_THROW(orrery::CreatePlacementGroup({.name = "pg_fraction", .bundles = {{{"CPU", 1.5}}}}),
               orrery::ConfigError);
  EXPECT_THROW(
      orrery::CreatePlacementGroup({.name = "pg_zero", .bundles = {{{"CPU", 1}}, {{"GPU", 0}}}}),
      orrery::ConfigError);
  EXPECT_THROW(orrery::CreatePlacementGroup({.name = "pg_empty_bundle", .bundles = {{}}}),
               orrery::ConfigError);
}

TEST(PlacementGroupTest, UnknownNameIsNullopt) {
  EXPECT_FALSE(orrery::GetPlacementGroup("no_group_has_this_name").has_value());
}

}  // namespace
