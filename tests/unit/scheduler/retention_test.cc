// Retention (docs/redis-schema.md "Retention"): which records have ended, and the store
// that deletes them once they are older than the TTL.
#include "scheduler/src/retention.h"

#include <gtest/gtest.h>

#include "tests/unit/scheduler/head_harness.h"

namespace orrery::scheduler {
namespace {

TEST(EndedAtTest, OnlyTerminalRecordsWithAnEndTimeHaveEnded) {
  EXPECT_EQ(EndedAt("actors", R"({"state":"DEAD","end_time":100.5,"spec":"9a00"})"), 100.5);
  EXPECT_EQ(EndedAt("jobs", R"({"state":"FINISHED","end_time":7})"), 7.0);
  EXPECT_EQ(EndedAt("train_runs", R"({"status":"ERRORED","end_time":9.0})"), 9.0);
  EXPECT_EQ(EndedAt("submissions", R"({"state":"SUCCEEDED","end_time":3})"), 3.0);
  EXPECT_EQ(EndedAt("nodes", R"({"alive":false,"end_time":5.0})"), 5.0);
  // Running, or no usable end time: never expired.
  EXPECT_FALSE(EndedAt("actors", R"({"state":"ALIVE","end_time":100})"));
  EXPECT_FALSE(EndedAt("actors", R"({"state":"RESTARTING","end_time":100})"));
  EXPECT_FALSE(EndedAt("jobs", R"({"state":"RUNNING","end_time":100})"));
  EXPECT_FALSE(EndedAt("train_runs", R"({"status":"RUNNING","end_time":100})"));
  EXPECT_FALSE(EndedAt("nodes", R"({"alive":true,"end_time":5.0})"));
  EXPECT_FALSE(EndedAt("nodes", R"({"state":"DEAD","end_time":5.0})"));  // nodes: `alive`
  EXPECT_FALSE(EndedAt("actors", R"({"state":"DEAD"})"));
  EXPECT_FALSE(EndedAt("actors", R"({"state":"DEAD","end_time":0})"));
  EXPECT_FALSE(EndedAt("actors", R"({"state":"DEAD","end_time":-4})"));
  EXPECT_FALSE(EndedAt("actors", R"({"state":"DEAD","end_time":"100"})"));
  EXPECT_FALSE(EndedAt("actors", R"({"state":"DEAD","end_time":1e999})"));
  EXPECT_FALSE(EndedAt("actors", R"({"state":"dead","end_time":100})"));
  EXPECT_FALSE(EndedAt("actors", R"({"state":["DEAD"],"end_time":100})"));
  // Not a JSON object.
  EXPECT_FALSE(EndedAt("actors", ""));
  EXPECT_FALSE(EndedAt("actors", "[1,2]"));
  EXPECT_FALSE(EndedAt("actors", R"({"state":"DEAD","end_time":100)"));
  EXPECT_FALSE(EndedAt("actors", "\xff\xfe"));
}

TEST(EndedAtTest, ExpiryAndTrimInterval) {
  EXPECT_FALSE(Expired(100, 101.9, 2));
  EXPECT_TRUE(Expired(100, 102, 2));
  EXPECT_DOUBLE_EQ(TrimIntervalS(7 * 86400), 60);
  EXPECT_DOUBLE_EQ(TrimIntervalS(20), 5);
  EXPECT_DOUBLE_EQ(TrimIntervalS(2), 1);
}

class RetentionStoreTest : public ::testing::Test {
 protected:
  std::shared_ptr<InMemoryStateStore> inner_ = std::make_shared<InMemoryStateStore>();
  RetentionStore store_{inner_, 2.0};
  bool Has(const std::string& table, const std::string& key) {
    return inner_->GetAll(table).value().count(key) > 0;
  }
};

TEST_F(RetentionStoreTest, ExpiredRecordsDisappearAndLiveOnesStay) {
  store_.Put("actors", "a1", R"({"state":"DEAD","end_time":100})");
  store_.Put("actors", "a2", R"({"state":"ALIVE","end_time":0})");
  store_.Put("jobs", "j1", R"({"state":"FINISHED","end_time":101})");
  store_.Put("pending", "p1", R"({"state":"DEAD","end_time":1})");  // not a history table
  store_.Put("train_runs", "r1", R"({"status":"FINISHED","end_time":100})");
  inner_->StreamAdd("train:r1:metrics", 0, {{"iteration", "1"}});
  EXPECT_EQ(store_.noted(), 3u);

  EXPECT_EQ(store_.Trim(0, 101.5), 0u);  // nothing is 2 s old yet
  EXPECT_EQ(store_.Trim(0.5, 103), 0u);  // less than the trim interval since the last trim
  EXPECT_EQ(store_.Trim(1, 102.5), 2u);  // a1 and r1
  EXPECT_FALSE(Has("actors", "a1"));
  EXPECT_FALSE(Has("train_runs", "r1"));
  EXPECT_TRUE(inner_->Stream("train:r1:metrics").empty());
  EXPECT_TRUE(Has("jobs", "j1"));
  EXPECT_EQ(store_.Trim(2, 103), 1u);
  EXPECT_FALSE(Has("jobs", "j1"));
  EXPECT_EQ(store_.Trim(1e6, 1e12), 0u);
  EXPECT_TRUE(Has("actors", "a2"));
  EXPECT_TRUE(Has("pending", "p1"));
}

TEST_F(RetentionStoreTest, ARecordThatLivesAgainOrIsDeletedIsNoLongerDue) {
  store_.Put("nodes", "n1", R"({"alive":false,"end_time":100})");
  store_.Put("nodes", "n1", R"({"alive":true,"end_time":0})");  // the node came back
  store_.Put("actors", "a1", R"({"state":"DEAD","end_time":100})");
  store_.Delete("actors", "a1");
  EXPECT_EQ(store_.noted(), 0u);
  EXPECT_EQ(store_.Trim(0, 1e9), 0u);
  EXPECT_TRUE(Has("nodes", "n1"));
}

TEST_F(RetentionStoreTest, RecordsReadBackAtStartExpire) {
  inner_->Put("actors", "a1", R"({"state":"DEAD","end_time":100})");
  inner_->Put("actors", "a2", R"({"state":"PENDING","end_time":0})");
  inner_->Put("jobs", "j1", "not json");
  ASSERT_EQ(store_.GetAll("actors").value().size(), 2u);
  ASSERT_EQ(store_.GetAll("jobs").value().size(), 1u);
  EXPECT_EQ(store_.Trim(0, 200), 1u);
  EXPECT_FALSE(Has("actors", "a1"));
  EXPECT_TRUE(Has("actors", "a2"));
  EXPECT_TRUE(Has("jobs", "j1"));
}

TEST_F(RetentionStoreTest, ARecordStillInUseIsKeptAndAskedAgainOneTtlLater) {
  int asked = 0;
  bool in_use = true;
  store_.SetForget([&](const std::string& table, const std::string& key) {
    EXPECT_EQ(table, "jobs");
    EXPECT_EQ(key, "j1");
    ++asked;
    return !in_use;
  });
  store_.Put("jobs", "j1", R"({"state":"FINISHED","end_time":100})");
  EXPECT_EQ(store_.Trim(0, 200), 0u);
  EXPECT_EQ(asked, 1);
  EXPECT_TRUE(Has("jobs", "j1"));
  EXPECT_EQ(store_.Trim(10, 201), 0u);  // asked again at 200 + 2
  EXPECT_EQ(asked, 1);
  in_use = false;
  EXPECT_EQ(store_.Trim(20, 202), 1u);
  EXPECT_EQ(asked, 2);
  EXPECT_FALSE(Has("jobs", "j1"));
}

TEST_F(RetentionStoreTest, ATrimDeletesABoundedBatch) {
  for (size_t i = 0; i < RetentionStore::kMaxBatch + 5; ++i)
    store_.Put("actors", "a" + std::to_string(i), R"({"state":"DEAD","end_time":100})");
  EXPECT_EQ(store_.Trim(0, 200), RetentionStore::kMaxBatch);
  EXPECT_EQ(store_.Trim(1, 200), 5u);
  EXPECT_TRUE(inner_->GetAll("actors").value().empty());
}

// The head's managers drop their copies of expired entities, but never of live ones.
TEST(HeadForgetTest, ManagersForgetOnlyWhatHasEnded) {
  testing::HeadHarness h;
  std::string node = h.AddNode({{"CPU", 2}});
  std::string job = h.AddJob();
  auto create = h.ActorRequest(job, {{"CPU", 1}});
  h.m.actors.OnCreate(create, 0);
  std::string actor_hex = Hex(create.spec.actor_id);
  EXPECT_FALSE(h.m.Forget("nodes", Hex(node)));
  EXPECT_FALSE(h.m.Forget("actors", actor_hex));
  EXPECT_FALSE(h.m.Forget("jobs", Hex(job)));

  h.m.NodeDied(h.nodes.Index(node), "test", 0);  // its actor dies (no restarts)
  ASSERT_EQ(h.m.actors.Find(create.spec.actor_id)->state, proto::ActorState::kDead);
  auto record = h.Table("actors")[actor_hex];
  EXPECT_TRUE(EndedAt("actors", record)) << record;
  EXPECT_TRUE(EndedAt("nodes", h.Table("nodes")[Hex(node)])) << h.Table("nodes")[Hex(node)];
  EXPECT_TRUE(h.m.Forget("actors", actor_hex));
  EXPECT_EQ(h.m.actors.Find(create.spec.actor_id), nullptr);
  EXPECT_TRUE(h.m.Forget("nodes", Hex(node)));
  EXPECT_EQ(h.nodes.Index(node), -1);
  EXPECT_TRUE(h.nodes.Info(0).nodes.empty());
  EXPECT_FALSE(h.m.Forget("jobs", Hex(job)));  // still running
}

}  // namespace
}  // namespace orrery::scheduler
