// The process-local object store's side of nested refs (docs/objects.md "Lifetime"): a
// borrowed entry tells its owner when this process starts and stops holding refs; an owned
// entry lives while any borrower holds it (a borrower's -1 may overtake its +1); a shared
// entry goes a grace period after the last holder; refs contained in a value live as long
// as the value's entry; hostile borrows are bounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "actors/src/object_store.h"
#include "core/internal/clock.h"
#include "core/internal/peer_watch.h"

namespace orrery::runtime {
namespace {

class ObjectStoreBorrowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.SetBorrowHook([this](const ObjectId& id, const std::string& owner, int delta) {
      told_.emplace_back(id, owner, delta);
    });
    store_.SetFreeHook(
        [this](const ObjectId& id, const proto::ObjectLocationMsg&) { freed_.push_back(id); });
  }
  bool Present(const ObjectId& id) { return store_.Lookup(id) != ObjectStore::Presence::kAbsent; }
  // Past every grace period started so far.
  static double Later() { return MonotonicSeconds() + ObjectStore::kShareGraceS + 1; }

  ObjectStore store_;
  std::vector<std::tuple<ObjectId, std::string, int>> told_;
  std::vector<ObjectId> freed_;
};

TEST_F(ObjectStoreBorrowTest, ABorrowedEntryTellsItsOwnerOnceWhenHeldAndWhenGone) {
  ObjectId id = ObjectId::Random();
  store_.AddRef(id, "tcp://owner:1");
  store_.AddRef(id, "tcp://owner:1");
  ASSERT_EQ(told_.size(), 1u) << "one +1 however many local refs";
  EXPECT_EQ(told_[0], std::make_tuple(id, std::string("tcp://owner:1"), 1));
  store_.RemoveRef(id);
  EXPECT_EQ(told_.size(), 1u);
  store_.RemoveRef(id);
  ASSERT_EQ(told_.size(), 2u);
  EXPECT_EQ(told_[1], std::make_tuple(id, std::string("tcp://owner:1"), -1));
  EXPECT_FALSE(Present(id));
}

TEST_F(ObjectStoreBorrowTest, AnOwnedEntryLivesWhileABorrowerHoldsIt) {
  ObjectId id = ObjectId::Random();
  store_.AddRef(id);
  store_.PutValue(id, std::make_shared<const std::string>("v"));
  ASSERT_TRUE(store_.AddBorrower(id, "tcp://b:1", +1).ok());
  store_.RemoveRef(id);
  store_.ReleaseExpired(Later());
  EXPECT_TRUE(Present(id)) << "the borrower still holds it";
  ASSERT_TRUE(store_.AddBorrower(id, "tcp://b:1", -1).ok());
  EXPECT_TRUE(Present(id)) << "a shared entry outlives its last holder by the grace period";
  store_.ReleaseExpired(MonotonicSeconds());
  EXPECT_TRUE(Present(id));
  store_.ReleaseExpired(Later());
  EXPECT_FALSE(Present(id));
  EXPECT_TRUE(told_.empty()) << "an owner tells nobody";
}

TEST_F(ObjectStoreBorrowTest, ABorrowersMinusOneMayOvertakeItsPlusOne) {
  ObjectId id = ObjectId::Random();
  store_.AddRef(id);
  store_.PutValue(id, std::make_shared<const std::string>("v"));
  ASSERT_TRUE(store_.AddBorrower(id, "tcp://b:1", +1).ok());
  ASSERT_TRUE(store_.AddBorrower(id, "tcp://b:1", -1).ok());  // first hold ended
  ASSERT_TRUE(store_.AddBorrower(id, "tcp://b:1", -1).ok());  // second hold's -1 first
  store_.RemoveRef(id);
  store_.ReleaseExpired(Later());
  EXPECT_TRUE(Present(id)) << "the second +1 is still on its way";
  ASSERT_TRUE(store_.AddBorrower(id, "tcp://b:1", +1).ok());
  store_.ReleaseExpired(Later());
  EXPECT_FALSE(Present(id));
}

TEST_F(ObjectStoreBorrowTest, ASharedEntryWaitsTheGraceForABorrowOnItsWay) {
  ObjectId id = ObjectId::Random();
  store_.AddRef(id);
  store_.PutValue(id, std::make_shared<const std::string>("v"));
  store_.MarkShared(id);
  store_.RemoveRef(id);
  EXPECT_TRUE(Present(id));
  ASSERT_TRUE(store_.AddBorrower(id, "tcp://late:1", +1).ok()) << "the +1 within the grace";
  store_.ReleaseExpired(Later());
  EXPECT_TRUE(Present(id));

  ObjectId plain = ObjectId::Random();
  store_.AddRef(plain);
  store_.PutValue(plain, std::make_shared<const std::string>("v"));
  store_.RemoveRef(plain);
  EXPECT_FALSE(Present(plain)) << "an entry never shared goes at once, as before";
}

TEST_F(ObjectStoreBorrowTest, ContainedRefsLiveAsLongAsTheirValue) {
  ObjectId value = ObjectId::Random();
  store_.AddRef(value);
  store_.PutValue(value, std::make_shared<const std::string>("v"));
  auto inner = std::make_shared<const internal::RefHolder>(ObjectId::Random(), "tcp://o:1");
  std::weak_ptr<const internal::RefHolder> watch = inner;
  store_.AttachContained(value, {std::move(inner)});
  EXPECT_FALSE(watch.expired());
  store_.RemoveRef(value);
  EXPECT_TRUE(watch.expired()) << "dropped with the value";

  auto orphan = std::make_shared<const internal::RefHolder>(ObjectId::Random(), "tcp://o:1");
  std::weak_ptr<const internal::RefHolder> watch_orphan = orphan;
  store_.AttachContained(ObjectId::Random(), {std::move(orphan)});
  EXPECT_TRUE(watch_orphan.expired()) << "a value already gone keeps nothing";
}

TEST_F(ObjectStoreBorrowTest, BorrowsOfObjectsNotOwnedHereOrPastTheBoundAreRefused) {
  EXPECT_EQ(store_.AddBorrower(ObjectId::Random(), "tcp://b:1", +1).code(), StatusCode::kNotFound)
      << "no entry is created for an unknown object";
  EXPECT_EQ(store_.Size(), 0u);

  ObjectId borrowed = ObjectId::Random();
  store_.AddRef(borrowed, "tcp://owner:1");
  EXPECT_EQ(store_.AddBorrower(borrowed, "tcp://b:1", +1).code(), StatusCode::kNotFound)
      << "only the owner counts borrowers";

  ObjectId id = ObjectId::Random();
  store_.AddRef(id);
  for (size_t i = 0; i < ObjectStore::kMaxBorrowers; ++i)
    ASSERT_TRUE(store_.AddBorrower(id, "tcp://b:" + std::to_string(i), +1).ok());
  EXPECT_EQ(store_.AddBorrower(id, "tcp://one-too-many:1", +1).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(store_.AddBorrower(id, "tcp://b:0", +1).ok()) << "a known borrower still counts";
}

TEST_F(ObjectStoreBorrowTest, TakeBorrowedEndsTheTellingOnce) {
  ObjectId id = ObjectId::Random();
  store_.AddRef(id, "tcp://owner:1");
  auto taken = store_.TakeBorrowed();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0], std::make_pair(id, std::string("tcp://owner:1")));
  told_.clear();
  store_.RemoveRef(id);
  EXPECT_TRUE(told_.empty()) << "the stopping process told the owner itself";
  EXPECT_TRUE(store_.TakeBorrowed().empty());
}

TEST_F(ObjectStoreBorrowTest, ADeadBorrowersHoldsEnd) {
  ObjectId id = ObjectId::Random();
  store_.AddRef(id);
  store_.PutValue(id, std::make_shared<const std::string>("v"));
  ASSERT_TRUE(store_.AddBorrower(id, "tcp://dead:1", +1).ok());
  ASSERT_TRUE(store_.AddBorrower(id, "tcp://alive:1", +1).ok());
  store_.RemoveRef(id);
  EXPECT_EQ(store_.Borrowers(), (std::set<std::string>{"tcp://alive:1", "tcp://dead:1"}));
  store_.DropBorrower("tcp://dead:1");
  store_.ReleaseExpired(Later());
  EXPECT_TRUE(Present(id)) << "the live borrower still holds it";
  store_.DropBorrower("tcp://alive:1");
  store_.ReleaseExpired(Later());
  EXPECT_FALSE(Present(id));
}

TEST_F(ObjectStoreBorrowTest, AResultThatArrivesAfterACancelIsFreed) {
  proto::ObjectLocationMsg where{"tcp://node:1", "127.0.0.1:2", 1 << 20};
  ObjectId cancelled = ObjectId::Random();
  store_.AddRef(cancelled);
  store_.MarkPending(cancelled);
  store_.PutError(cancelled, ObjectError{proto::ErrorKind::kTaskCancelledError, "", "cancelled"});
  store_.PutLocation(cancelled, where, /*owned=*/true);  // the worker had finished after all
  EXPECT_EQ(freed_, std::vector<ObjectId>{cancelled}) << "nothing holds that copy: freed";

  freed_.clear();
  ObjectId kept = ObjectId::Random();
  store_.AddRef(kept);
  store_.PutLocation(kept, where, /*owned=*/true);
  store_.PutLocation(kept, where, /*owned=*/true);  // the same reply twice
  EXPECT_TRUE(freed_.empty()) << "the copy the entry holds stays";
  store_.RemoveRef(kept);
  EXPECT_EQ(freed_, std::vector<ObjectId>{kept});
}

TEST(PeerWatchTest, PingsEveryPeriodAndReportsThePeersThatStopAnswering) {
  PeerWatch watch(2, 10);
  std::vector<std::string> dead;
  auto pings = watch.Tick(100, {"a", "b"}, &dead);
  ASSERT_EQ(pings.size(), 2u);
  EXPECT_TRUE(watch.Tick(101, {"a", "b"}, &dead).empty()) << "one round per period";
  for (double t = 102; t <= 112; t += 2) {
    for (const auto& p : watch.Tick(t, {"a", "b"}, &dead)) {
      if (p.address == "a") {
        EXPECT_TRUE(watch.OnPong(p.request_id));
      }
    }
  }
  EXPECT_EQ(dead, std::vector<std::string>{"b"}) << "b never answered for over 10 s";
  EXPECT_FALSE(watch.OnPong(12345)) << "an id of no ping";
  dead.clear();
  watch.Tick(114, {}, &dead);
  EXPECT_TRUE(dead.empty()) << "peers no longer watched are forgotten";
}

// Probes a scripted answer: "gone" is refused, anything else listens.
class ScriptedProber final : public Prober {
 public:
  void Probe(const std::string& key, const std::string&) override {
    probed.push_back(key);
    done.emplace_back(key, key == "gone" ? ProbeOutcome::kRefused : ProbeOutcome::kListening);
  }
  std::vector<std::pair<std::string, ProbeOutcome>> Take() override {
    auto out = std::move(done);
    done.clear();
    return out;
  }
  std::vector<std::string> probed;
  std::vector<std::pair<std::string, ProbeOutcome>> done;
};

TEST(PeerWatchTest, APeerFoundGoneIsDeadAtOnceAndAPausedOneOnlyAfterTheTolerance) {
  auto owned = std::make_unique<ScriptedProber>();
  ScriptedProber* prober = owned.get();
  PeerWatch watch(2, 30, std::move(owned));
  std::vector<std::string> dead;
  // One round at time t over `peers`, "fine" answering its ping.
  auto round = [&](double t, const std::set<std::string>& peers) {
    for (const auto& p : watch.Tick(t, peers, &dead)) {
      if (p.address == "fine") {
        EXPECT_TRUE(watch.OnPong(p.request_id));
      }
    }
  };
  double t = 100;
  for (; t <= 106; t += 2) round(t, {"gone", "paused", "fine"});
  EXPECT_EQ(dead, std::vector<std::string>{"gone"}) << "refused: dead without the 30 s";
  EXPECT_EQ(std::count(prober->probed.begin(), prober->probed.end(), "fine"), 0)
      << "a peer that answers is not probed";
  dead.clear();
  for (; t <= 130; t += 2) round(t, {"paused", "fine"});
  EXPECT_TRUE(dead.empty()) << "a paused peer (its connect accepted) is kept for 30 s";
  for (; t <= 134; t += 2) round(t, {"paused", "fine"});
  EXPECT_EQ(dead, std::vector<std::string>{"paused"}) << "silent past the tolerance";
}

}  // namespace
}  // namespace orrery::runtime
