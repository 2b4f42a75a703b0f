// CollectiveGroup's Broadcast, AllGather and Barrier, collectives back to back with ranks
// racing ahead, and the error paths (a silent peer, vectors of different lengths).
// N groups in one process over loopback TCP, one thread per rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "orrery/errors.h"
#include "tests/unit/train/collective_harness.h"
#include "train/src/collective.h"
#include "train/src/shm_region.h"

namespace orrery::train {
namespace {

using test_support::ErrorsText;
using test_support::GroupContext;
using test_support::IsTrainingFailed;
using test_support::LocalGroup;
using test_support::MessageOf;
using ::testing::HasSubstr;

// Rank r's distinct vector of `n` values.
std::vector<double> Pattern(int r, size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = r * 1000.0 + double(i) * 0.5;
  return v;
}

class BroadcastTest : public ::testing::TestWithParam<int> {};

TEST_P(BroadcastTest, FromTheLastRankReplacesEveryVectorAndItsLength) {
  const int n = GetParam(), root = n - 1;
  LocalGroup g(n);
  for (size_t count : {size_t(5), size_t(3 * 1024 * 1024 / sizeof(double) + 1)}) {
    SCOPED_TRACE("count " + std::to_string(count));
    // Every rank starts with a vector of another length; the root's wins.
    std::vector<std::vector<double>> v;
    for (int r = 0; r < n; ++r) v.push_back(Pattern(r, r == root ? count : size_t(r) + 1));
    auto errors = g.Run([&](int r, CollectiveGroup& group) {
      GroupContext ctx(&group);
      ctx.Broadcast(v[size_t(r)], root);
    });
    ASSERT_EQ(ErrorsText(errors), "");
    for (int r = 0; r < n; ++r) EXPECT_TRUE(v[size_t(r)] == Pattern(root, count)) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Groups, BroadcastTest, ::testing::Values(2, 3, 4));

TEST(Broadcast, RootOutsideTheGroupThrowsOnEveryRank) {
  LocalGroup g(2, 5);
  auto errors = g.Run([&](int, CollectiveGroup& group) {
    int x = 1;
    group.Broadcast(&x, sizeof(x), 2);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(IsTrainingFailed(errors[size_t(r)]))
        << "rank " << r << ": " << MessageOf(errors[size_t(r)]);
    EXPECT_THAT(MessageOf(errors[size_t(r)]), HasSubstr("root 2"));
  }
}

TEST(Broadcast, ReceiverExpectingAnotherSizeThrows) {
  LocalGroup g(2, 5);
  auto errors = g.Run([&](int r, CollectiveGroup& group) {
    std::vector<int32_t> v(r == 0 ? 4 : 6, 1);
    group.Broadcast(v.data(), v.size() * sizeof(int32_t), 0);
  });
  EXPECT_FALSE(errors[0]) << MessageOf(errors[0]);
  EXPECT_TRUE(IsTrainingFailed(errors[1])) << MessageOf(errors[1]);
  EXPECT_THAT(MessageOf(errors[1]), HasSubstr("Broadcast"));
}

TEST(AllGather, DifferentLengthsConcatenateInRankOrder) {
  const std::vector<size_t> lengths{2, 0, 5, 1};
  LocalGroup g(4);
  std::vector<std::vector<int64_t>> got(4);
  std::vector<std::vector<std::string>> raw(4);
  auto errors = g.Run([&](int r, CollectiveGroup& group) {
    std::vector<int64_t> mine(lengths[size_t(r)]);
    std::iota(mine.begin(), mine.end(), int64_t(r) * 100);
    GroupContext ctx(&group);
    got[size_t(r)] = ctx.AllGather(mine);
    raw[size_t(r)] = group.AllGather(mine.data(), mine.size() * sizeof(int64_t));
  });
  ASSERT_EQ(ErrorsText(errors), "");
  const std::vector<int64_t> want{0, 1, 200, 201, 202, 203, 204, 300};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(got[size_t(r)], want) << "rank " << r;
    ASSERT_EQ(raw[size_t(r)].size(), 4u);
    for (int p = 0; p < 4; ++p)
      EXPECT_EQ(raw[size_t(r)][size_t(p)].size(), lengths[size_t(p)] * sizeof(int64_t));
  }
}

TEST(AllGather, LargePartsArriveWhole) {
  LocalGroup g(3);
  const size_t count = 300000;  // 2.4 MB of doubles per rank
  std::vector<std::vector<double>> got(3);
  auto errors = g.Run([&](int r, CollectiveGroup& group) {
    GroupContext ctx(&group);
    got[size_t(r)] = ctx.AllGather(Pattern(r, count + size_t(r)));
  });
  ASSERT_EQ(ErrorsText(errors), "");
  std::vector<double> want;
  for (int r = 0; r < 3; ++r) {
    auto p = Pattern(r, count + size_t(r));
    want.insert(want.end(), p.begin(), p.end());
  }
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(got[size_t(r)] == want) << "rank " << r;
}

TEST(Barrier, NoRankLeavesBeforeEveryRankArrived) {
  constexpr int kN = 4, kRounds = 20;
  LocalGroup g(kN);
  std::atomic<int> arrived{0};
  std::atomic<int> early{0};
  auto errors = g.Run([&](int, CollectiveGroup& group) {
    GroupContext ctx(&group);
    for (int round = 1; round <= kRounds; ++round) {
      arrived.fetch_add(1);
      ctx.Barrier();
      if (arrived.load() < round * kN) early.fetch_add(1);
      ctx.Barrier();  // nobody starts the next round before all checked this one
    }
  });
  ASSERT_EQ(ErrorsText(errors), "");
  EXPECT_EQ(early.load(), 0);
  EXPECT_EQ(arrived.load(), kN * kRounds);
}

// Many different collectives in a row: fast ranks send the next ones' messages before
// slow ranks have finished the previous ones; every result must still be right.
TEST(BackToBack, MixedCollectivesWithRanksRacingAhead) {
  constexpr int kN = 3, kIterations = 60;
  LocalGroup g(kN);
  std::vector<std::string> problems(kN);
  auto errors = g.Run([&](int r, CollectiveGroup& group) {
    GroupContext ctx(&group);
    for (int it = 0; it < kIterations; ++it) {
      std::vector<int64_t> sum{int64_t(r + it), 1};
      ctx.AllReduce(sum);
      const int64_t want_sum = int64_t(kN) * it + kN * (kN - 1) / 2;
      if (sum != std::vector<int64_t>{want_sum, kN})
        problems[size_t(r)] += "sum@" + std::to_string(it) + " ";
      const int root = it % kN;
      std::vector<int32_t> b{r == root ? it * 10 + root : -1};
      ctx.Broadcast(b, root);
      if (b != std::vector<int32_t>{it * 10 + root})
        problems[size_t(r)] += "bcast@" + std::to_string(it) + " ";
      std::vector<float> mine(size_t(r + it % 2), float(r));
      std::vector<float> all = ctx.AllGather(mine);
      std::vector<float> want;
      for (int p = 0; p < kN; ++p) want.insert(want.end(), size_t(p + it % 2), float(p));
      if (all != want) problems[size_t(r)] += "gather@" + std::to_string(it) + " ";
      if (it % 7 == 0) ctx.Barrier();
    }
  });
  ASSERT_EQ(ErrorsText(errors), "");
  for (int r = 0; r < kN; ++r) EXPECT_EQ(problems[size_t(r)], "") << "rank " << r;
}

// Ranks 1 and 2 run 2K broadcasts (K from root 1, then K from root 2) while rank 0 has not
// started; rank 0 then finds both roots' messages queued, interleaved, and has to keep those
// of later collectives until it gets to them.
TEST(BackToBack, MessagesThatArriveEarlyAreKept) {
  constexpr int kK = 25;
  LocalGroup g(3);
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  std::vector<int32_t> at_rank0;
  std::vector<std::vector<double>> reduced(3);
  auto errors = g.Run([&](int r, CollectiveGroup& group) {
    GroupContext ctx(&group);
    if (r == 0) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::seconds(30), [&] { return finished == 2; });
    }
    for (int i = 0; i < 2 * kK; ++i) {
      const int root = i < kK ? 1 : 2;
      std::vector<int32_t> v{r == root ? i * 3 + root : -7};
      ctx.Broadcast(v, root);
      if (r == 0) at_rank0.push_back(v.at(0));
    }
    if (r != 0) {
      std::lock_guard<std::mutex> lock(mu);
      ++finished;
      cv.notify_all();
    }
    reduced[size_t(r)] = {double(r), 1.0};
    ctx.AllReduce(reduced[size_t(r)]);
    ctx.Barrier();
  });
  ASSERT_EQ(ErrorsText(errors), "");
  ASSERT_EQ(at_rank0.size(), size_t(2 * kK));
  for (int i = 0; i < 2 * kK; ++i)
    EXPECT_EQ(at_rank0[size_t(i)], i * 3 + (i < kK ? 1 : 2)) << "broadcast " << i;
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(reduced[size_t(r)], (std::vector<double>{3.0, 3.0})) << "rank " << r;
}

// Rank 0 calls `call` alone (rank 1 never does) with a 0.5 s timeout.
std::exception_ptr AloneWithTimeout(const std::function<void(CollectiveGroup&)>& call,
                                    bool shm = false) {
  LocalGroup g(2, /*timeout_s=*/0.5, shm);
  auto errors = g.Run([&](int, CollectiveGroup& group) { call(group); }, {0});
  return errors[0];
}

TEST(CollectiveTimeout, SilentPeerFailsEachCollectiveNamingIt) {
  struct Case {
    const char* name;
    std::function<void(CollectiveGroup&)> call;
  };
  std::vector<Case> cases{
      {"AllReduce",
       [](CollectiveGroup& g) {
         std::vector<float> v(10, 1.f);
         g.AllReduce(v.data(), v.size(), 0, ReduceOp::kSum);
       }},
      {"Broadcast",
       [](CollectiveGroup& g) {
         int64_t x = 0;
         g.Broadcast(&x, sizeof(x), 1);
       }},
      {"AllGather", [](CollectiveGroup& g) { (void)g.AllGather("abc", 3); }},
  };
  for (const auto& c : cases) {
    std::exception_ptr e = AloneWithTimeout(c.call);
    EXPECT_TRUE(IsTrainingFailed(e)) << c.name << ": " << MessageOf(e);
    EXPECT_THAT(MessageOf(e), HasSubstr(c.name));
    EXPECT_THAT(MessageOf(e), HasSubstr("rank 1"));
  }
}

TEST(CollectiveTimeout, SilentPeerFailsABarrierNamingIt) {
  std::exception_ptr e = AloneWithTimeout([](CollectiveGroup& g) { g.Barrier(); });
  EXPECT_TRUE(IsTrainingFailed(e)) << MessageOf(e);
  EXPECT_THAT(MessageOf(e), HasSubstr("Barrier"));
}

// The first large all-reduce first agrees with the peers on shared memory (whether it is
// wanted or not); a silent peer there is still a failed AllReduce to the caller.
class FirstLargeAllReduceTimeout : public ::testing::TestWithParam<bool> {};

TEST_P(FirstLargeAllReduceTimeout, SilentPeerFailsItNamingAllReduce) {
  std::exception_ptr e = AloneWithTimeout(
      [](CollectiveGroup& g) {
        std::vector<double> v(CollectiveGroup::kRingThresholdBytes / sizeof(double) * 2 + 1, 1.0);
        g.AllReduce(v.data(), v.size(), 1, ReduceOp::kSum);
      },
      /*shm=*/GetParam());
  EXPECT_TRUE(IsTrainingFailed(e)) << MessageOf(e);
  EXPECT_THAT(MessageOf(e), HasSubstr("AllReduce"));
}

INSTANTIATE_TEST_SUITE_P(SharedMemoryWanted, FirstLargeAllReduceTimeout, ::testing::Bool());

// Once shared memory is in use, the workers meet at barriers in it, not through messages: a
// worker that stops calling still fails its peer's next all-reduce after the timeout.
TEST(CollectiveTimeout, SilentPeerFailsASharedMemoryAllReduce) {
  ShmRegion probe;
  if (!probe.Create(4096).ok()) GTEST_SKIP() << "no usable /dev/shm";
  LocalGroup g(2, /*timeout_s=*/0.5, /*shared_memory=*/true);
  bool used[2] = {false, false};  // one byte each: written by two threads
  auto errors = g.Run([&](int r, CollectiveGroup& group) {
    std::vector<float> v(CollectiveGroup::kRingThresholdBytes / sizeof(float) * 3, 1.f);
    group.AllReduce(v.data(), v.size(), 0, ReduceOp::kSum);
    used[r] = group.UsesSharedMemory();
    if (r == 0) group.AllReduce(v.data(), v.size(), 0, ReduceOp::kSum);  // rank 1 never comes
  });
  ASSERT_TRUE(used[0] && used[1]) << "shared memory was not set up";
  EXPECT_TRUE(IsTrainingFailed(errors[0])) << MessageOf(errors[0]);
  EXPECT_THAT(MessageOf(errors[0]), HasSubstr("AllReduce (call #2)"));
  EXPECT_THAT(MessageOf(errors[0]), HasSubstr("shared memory"));
  EXPECT_EQ(MessageOf(errors[1]), "");
  // Rank 0 is still counted in at the barrier it left: its group refuses to use the region
  // again rather than meet a barrier that would open one worker early.
  auto again = g.Run(
      [&](int, CollectiveGroup& group) {
        std::vector<float> v(CollectiveGroup::kRingThresholdBytes / sizeof(float) * 3, 1.f);
        group.AllReduce(v.data(), v.size(), 0, ReduceOp::kSum);
      },
      {0});
  EXPECT_TRUE(IsTrainingFailed(again[0])) << MessageOf(again[0]);
  EXPECT_THAT(MessageOf(again[0]), HasSubstr("cannot all-reduce large vectors again"));
}

// Once shared memory is in use, a worker whose vector is under the ring threshold reduces
// through messages while its peer waits in shared memory: both fail at once, naming the
// lengths, instead of waiting out the timeout.
TEST(CollectiveLengthMismatch, SharedMemoryAgainstMessagesThrowsOnBothSides) {
  ShmRegion probe;
  if (!probe.Create(4096).ok()) GTEST_SKIP() << "no usable /dev/shm";
  const size_t large = CollectiveGroup::kRingThresholdBytes / sizeof(double) * 2;
  LocalGroup g(2, /*timeout_s=*/60, /*shared_memory=*/true);
  auto errors = g.Run([&](int r, CollectiveGroup& group) {
    std::vector<double> v(large, 1.0);
    group.AllReduce(v.data(), v.size(), 1, ReduceOp::kSum);  // sets shared memory up
    if (!group.UsesSharedMemory()) throw std::runtime_error("shared memory was not set up");
    v.resize(r == 0 ? large : 10);
    group.AllReduce(v.data(), v.size(), 1, ReduceOp::kSum);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(IsTrainingFailed(errors[size_t(r)])) << "rank " << r << ": " << ErrorsText(errors);
    EXPECT_THAT(MessageOf(errors[size_t(r)]), HasSubstr("same length")) << "rank " << r;
  }
}

// After a length mismatch in shared memory every worker leaves together: the next call,
// with equal lengths, reduces right.
TEST(CollectiveLengthMismatch, SharedMemoryGroupReducesRightAfterAMismatch) {
  ShmRegion probe;
  if (!probe.Create(4096).ok()) GTEST_SKIP() << "no usable /dev/shm";
  const size_t large = CollectiveGroup::kRingThresholdBytes / sizeof(double) * 2;
  LocalGroup g(3, /*timeout_s=*/60, /*shared_memory=*/true);
  std::vector<std::vector<double>> results(3);
  std::vector<int> mismatches(3, 0);
  auto errors = g.Run([&](int r, CollectiveGroup& group) {
    for (int round = 0; round < 5; ++round) {
      std::vector<double> v(large + (r == 2 ? 1 : 0), 1.0);
      try {
        group.AllReduce(v.data(), v.size(), 1, ReduceOp::kSum);
      } catch (const TrainingFailedError&) {
        ++mismatches[size_t(r)];
      }
      std::vector<double> w(large, double(r + 1));
      group.AllReduce(w.data(), w.size(), 1, ReduceOp::kSum);
      results[size_t(r)] = w;
    }
  });
  ASSERT_EQ(ErrorsText(errors), "");
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(mismatches[size_t(r)], 5) << "rank " << r;
    ASSERT_EQ(results[size_t(r)].size(), large);
    EXPECT_EQ(results[size_t(r)].front(), 6.0) << "rank " << r;
    EXPECT_EQ(results[size_t(r)].back(), 6.0) << "rank " << r;
  }
}

// Rank r all-reduces a vector of counts[r] doubles; every rank must throw
// TrainingFailedError, at least one of them saying the lengths differ.
void ExpectLengthMismatchFails(const std::vector<size_t>& counts, bool shm) {
  const int n = int(counts.size());
  LocalGroup g(n, /*timeout_s=*/5, shm);
  auto errors = g.Run([&](int r, CollectiveGroup& group) {
    std::vector<double> v(counts[size_t(r)], 1.0 + r);
    group.AllReduce(v.data(), v.size(), 1, ReduceOp::kSum);
  });
  bool says_length = false;
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(IsTrainingFailed(errors[size_t(r)]))
        << "rank " << r << " got no error: " << MessageOf(errors[size_t(r)]);
    says_length =
        says_length || MessageOf(errors[size_t(r)]).find("same length") != std::string::npos;
  }
  EXPECT_TRUE(says_length) << ErrorsText(errors);
}

TEST(CollectiveLengthMismatch, SmallVectorsThrow) { ExpectLengthMismatchFails({10, 12}, false); }

TEST(CollectiveLengthMismatch, SmallVectorsThrowInAGroupOfThree) {
  ExpectLengthMismatchFails({10, 10, 9}, false);
}

TEST(CollectiveLengthMismatch, RingVectorsThrow) {
  ExpectLengthMismatchFails({100000, 100002}, false);
}

TEST(CollectiveLengthMismatch, RingVectorsThrowInAGroupOfThree) {
  ExpectLengthMismatchFails({100000, 100000, 100003}, false);
}

// Both vectors fit in one shared-memory piece; nothing compares the lengths there.
TEST(CollectiveLengthMismatch, SharedMemoryVectorsThrow) {
  ShmRegion probe;
  if (!probe.Create(4096).ok()) GTEST_SKIP() << "no usable /dev/shm";
  ExpectLengthMismatchFails({100000, 100002}, true);
}

}  // namespace
}  // namespace orrery::train
