// CheckpointManager (train/src/checkpoint_manager.h): which checkpoints num_to_keep keeps,
// with and without a score attribute, and that the latest one always stays.
#include "train/src/checkpoint_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace orrery::train {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

KeptCheckpoint Ckpt(int64_t index, std::optional<double> score = std::nullopt) {
  KeptCheckpoint c;
  c.index = index;
  c.path = "/runs/r/" + CheckpointDirName(index);
  if (score) c.metrics = {{"acc", *score}, {"step", double(index)}};
  return c;
}

std::vector<std::string> KeptPaths(const CheckpointManager& m) {
  std::vector<std::string> out;
  for (const auto& c : m.Kept()) out.push_back(c.path);
  return out;
}

std::string P(int64_t index) { return "/runs/r/" + CheckpointDirName(index); }

TEST(CheckpointDirName, IsTheOneBasedIterationInSixDigits) {
  EXPECT_EQ(CheckpointDirName(0), "checkpoint_000001");
  EXPECT_EQ(CheckpointDirName(41), "checkpoint_000042");
  EXPECT_EQ(CheckpointDirName(999999), "checkpoint_1000000");
}

TEST(CheckpointManager, KeepsEverythingWhenNumToKeepIsZero) {
  CheckpointManager m(CheckpointConfig{});
  for (int i = 0; i < 5; ++i) EXPECT_THAT(m.Register(Ckpt(i)), IsEmpty());
  EXPECT_EQ(m.Kept().size(), 5u);
  ASSERT_TRUE(m.Latest().has_value());
  EXPECT_EQ(m.Latest()->index, 4);
}

TEST(CheckpointManager, WithoutAScoreKeepsTheNewest) {
  CheckpointManager m(CheckpointConfig{.num_to_keep = 2});
  EXPECT_THAT(m.Register(Ckpt(0)), IsEmpty());
  EXPECT_THAT(m.Register(Ckpt(1)), IsEmpty());
  EXPECT_THAT(m.Register(Ckpt(2)), ElementsAre(P(0)));
  EXPECT_THAT(m.Register(Ckpt(3)), ElementsAre(P(1)));
  EXPECT_THAT(KeptPaths(m), ElementsAre(P(3), P(2)));  // newest first
  EXPECT_EQ(m.Latest()->index, 3);
}

TEST(CheckpointManager, ScoreMaxKeepsTheHighest) {
  CheckpointManager m(CheckpointConfig{.num_to_keep = 2, .score_attribute = "acc", .order = "max"});
  EXPECT_THAT(m.Register(Ckpt(0, 0.5)), IsEmpty());
  EXPECT_THAT(m.Register(Ckpt(1, 0.9)), IsEmpty());
  EXPECT_THAT(m.Register(Ckpt(2, 0.7)), ElementsAre(P(0)));
  EXPECT_THAT(KeptPaths(m), ElementsAre(P(1), P(2)));  // best first
  // A new best pushes out the worst of the kept.
  EXPECT_THAT(m.Register(Ckpt(3, 0.95)), ElementsAre(P(2)));
  EXPECT_THAT(KeptPaths(m), ElementsAre(P(3), P(1)));
}

TEST(CheckpointManager, ScoreMinKeepsTheLowest) {
  CheckpointManager m(CheckpointConfig{.num_to_keep = 2, .score_attribute = "acc", .order = "min"});
  (void)m.Register(Ckpt(0, 3.0));
  (void)m.Register(Ckpt(1, 1.0));
  EXPECT_THAT(m.Register(Ckpt(2, 2.0)), ElementsAre(P(0)));
  EXPECT_THAT(KeptPaths(m), ElementsAre(P(1), P(2)));
  EXPECT_THAT(m.Register(Ckpt(3, 0.5)), ElementsAre(P(2)));
  EXPECT_THAT(KeptPaths(m), ElementsAre(P(3), P(1)));
}

TEST(CheckpointManager, TheLatestStaysEvenWhenItScoresWorst) {
  CheckpointManager m(CheckpointConfig{.num_to_keep = 1, .score_attribute = "acc", .order = "max"});
  EXPECT_THAT(m.Register(Ckpt(0, 0.9)), IsEmpty());
  // Worse than the best: kept anyway because it is the latest (a restart resumes from it).
  EXPECT_THAT(m.Register(Ckpt(1, 0.1)), IsEmpty());
  EXPECT_THAT(KeptPaths(m), ElementsAre(P(0), P(1)));
  ASSERT_TRUE(m.Latest().has_value());
  EXPECT_EQ(m.Latest()->path, P(1));
  // Once it is no longer the latest and not among the best, it goes.
  EXPECT_THAT(m.Register(Ckpt(2, 0.2)), ElementsAre(P(1)));
  EXPECT_THAT(KeptPaths(m), ElementsAre(P(0), P(2)));
  EXPECT_EQ(m.Latest()->index, 2);
  // A new best replaces the old best and is the latest: only one stays.
  EXPECT_THAT(m.Register(Ckpt(3, 0.99)), UnorderedElementsAre(P(0), P(2)));
  EXPECT_THAT(KeptPaths(m), ElementsAre(P(3)));
}

TEST(CheckpointManager, CheckpointsWithoutTheScoreRankLast) {
  CheckpointManager m(CheckpointConfig{.num_to_keep = 1, .score_attribute = "acc", .order = "min"});
  (void)m.Register(Ckpt(0));  // no "acc"
  EXPECT_THAT(m.Register(Ckpt(1, 100.0)), ElementsAre(P(0)));
  EXPECT_THAT(m.Register(Ckpt(2)), IsEmpty());  // the latest, kept
  EXPECT_THAT(KeptPaths(m), ElementsAre(P(1), P(2)));
}

TEST(CheckpointManager, KeptCarriesTheMetrics) {
  CheckpointManager m(CheckpointConfig{.num_to_keep = 3, .score_attribute = "acc"});
  (void)m.Register(Ckpt(4, 0.25));
  auto kept = m.Kept();
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].index, 4);
  EXPECT_EQ(kept[0].metrics.at("acc"), 0.25);
  EXPECT_FALSE(CheckpointManager(CheckpointConfig{}).Latest().has_value());
}

}  // namespace
}  // namespace orrery::train
