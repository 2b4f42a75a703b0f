// Refs nested inside values (docs/objects.md "Lifetime"): a value that holds refs keeps their
// objects alive; a process that unpacks a ref owned elsewhere borrows it, and the owner keeps
// the object while any borrower holds it; the object is freed, while the driver still runs,
// once the last holder anywhere is gone (store usage back to zero).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "orrery/orrery.h"
#include "test_support.h"

namespace {

using orrery_test::kGetTimeoutMs;
using orrery_test::WaitFor;

using Bytes = std::vector<uint8_t>;
using Refs = std::vector<orrery::ObjectRef<Bytes>>;

constexpr size_t kObjectBytes = 1 << 20;  // kept in the node's store, so its usage shows it

Bytes Pattern(uint32_t seed) {
  Bytes b(kObjectBytes);
  for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t((i * 31 + seed) >> 3);
  return b;
}

uint64_t Sum(const Bytes& b) {
  uint64_t s = 0;
  for (size_t i = 0; i < b.size(); i += 97) s = s * 1099511628211ull + b[i];
  return s;
}

uint64_t SumAll(const Refs& refs) {
  uint64_t s = 0;
  for (const auto& r : refs) s += Sum(*orrery::Get(r, kGetTimeoutMs));
  return s;
}

// A task that reads the objects behind nested refs (it borrows them while it runs).
uint64_t SumNested(Refs refs) { return SumAll(refs); }

// A task that puts an object and returns a ref to it: the worker owns it, the caller borrows.
Refs PutInWorker(uint32_t seed) { return {orrery::Put(Pattern(seed))}; }

class Keeper {
 public:
  static Keeper* Create() { return new Keeper(); }
  // Keeps only how many refs it was given: a restart would need them again.
  static Keeper* CreateCounting(Refs refs) {
    auto* k = new Keeper();
    k->count_ = int(refs.size());
    return k;
  }
  int Count() { return count_; }
  int Keep(Refs refs) {
    kept_ = std::move(refs);
    return int(kept_.size());
  }
  uint64_t SumKept() { return SumAll(kept_); }
  int Drop() {
    kept_.clear();
    return 0;
  }

 private:
  Refs kept_;
  int count_ = 0;
};

ORRERY_REMOTE(SumNested, PutInWorker, Keeper::Create, Keeper::CreateCounting, &Keeper::Keep,
              &Keeper::SumKept, &Keeper::Drop, &Keeper::Count);

uint64_t StoreUsed() {
  uint64_t used = 0;
  for (const auto& n : orrery::Nodes()) used += n.object_store_used_bytes;
  return used;
}

// The object must stay: once the nodes report it (their heartbeats carry the usage), usage
// does not drop below `bytes` for twice the owner's grace period (a negative check, so it
// waits its whole time when all is well).
bool StaysStored(uint64_t bytes) {
  return WaitFor([&] { return StoreUsed() >= bytes; }) &&
         !WaitFor([&] { return StoreUsed() < bytes; }, std::chrono::seconds(7));
}

class NestedRefsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    orrery::Config c = orrery_test::TestClusterConfig();
    c.object_store_memory = 128ll << 20;
    orrery::Init(c);
  }
  void TearDown() override {
    if (orrery::IsInitialized()) orrery::Shutdown();
  }
};

TEST_F(NestedRefsTest, AValueHoldingRefsKeepsThemUntilItGoes) {
  const uint64_t expected = Sum(Pattern(1));
  {
    auto outer = orrery::Put(Refs{orrery::Put(Pattern(1))});  // the inner ref's only holder
    ASSERT_TRUE(StaysStored(kObjectBytes)) << "the value holding the ref keeps its object";
    auto inner = orrery::Get(outer, kGetTimeoutMs);
    EXPECT_EQ(SumAll(*inner), expected);
    auto by_task = orrery::Task(SumNested).Remote(outer);
    EXPECT_EQ(*orrery::Get(by_task, kGetTimeoutMs), expected) << "a worker reads it too";
  }
  EXPECT_TRUE(WaitFor([] { return StoreUsed() == 0; }))
      << "freed with the last holder, while the driver runs";
}

TEST_F(NestedRefsTest, ARefReturnedByATaskOutlivesTheTaskWhileTheCallerHoldsIt) {
  const uint64_t expected = Sum(Pattern(2));
  {
    auto result = orrery::Task(PutInWorker).Remote(2u);
    Refs refs = *orrery::Get(result, kGetTimeoutMs);
    result = orrery::ObjectRef<Refs>();  // only the unpacked ref is left
    ASSERT_EQ(refs.size(), 1u);
    ASSERT_TRUE(StaysStored(kObjectBytes)) << "the driver borrows what the worker owns";
    EXPECT_EQ(SumAll(refs), expected);
  }
  EXPECT_TRUE(WaitFor([] { return StoreUsed() == 0; })) << "the borrow ended: freed";
}

TEST_F(NestedRefsTest, AnActorKeepsABorrowedRefAfterTheDriverDropsItsOwn) {
  const uint64_t expected = Sum(Pattern(3));
  auto keeper = orrery::Actor(Keeper::Create).Remote();
  {
    auto ref = orrery::Put(Pattern(3));
    EXPECT_EQ(*orrery::Get(keeper.Task(&Keeper::Keep).Remote(Refs{ref}), kGetTimeoutMs), 1);
  }
  ASSERT_TRUE(StaysStored(kObjectBytes)) << "the actor still holds the driver's object";
  EXPECT_EQ(*orrery::Get(keeper.Task(&Keeper::SumKept).Remote(), kGetTimeoutMs), expected);
  orrery::Get(keeper.Task(&Keeper::Drop).Remote(), kGetTimeoutMs);
  EXPECT_TRUE(WaitFor([] { return StoreUsed() == 0; })) << "the actor's borrow ended: freed";
}

TEST_F(NestedRefsTest, RefsInALargeConstructorArgumentAreKeptForRestarts) {
  std::optional<orrery::ActorHandle<Keeper>> keeper;
  {
    // Over 100 KiB packed: the argument itself goes through the store, by reference.
    Refs refs{orrery::Put(Pattern(4))};
    for (int i = 0; i < 3000; ++i) refs.push_back(orrery::Put(Bytes{uint8_t(i)}));
    keeper = orrery::Actor(Keeper::CreateCounting).Remote(refs);
  }
  EXPECT_EQ(*orrery::Get(keeper->Task(&Keeper::Count).Remote(), kGetTimeoutMs), 3001);
  EXPECT_TRUE(StaysStored(kObjectBytes))
      << "the head keeps the spec for restarts, so the refs inside it stay";
  keeper->Kill();
}

}  // namespace
