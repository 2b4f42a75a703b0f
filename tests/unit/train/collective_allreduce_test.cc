// CollectiveGroup::AllReduce through the public Context API: N = 2, 3, 4 groups in one
// process (one thread per rank, loopback TCP), every op and element type, small vectors
// (the direct path) and large ones of an odd length not divisible by N (the ring path in
// several 1 MB chunks, or through shared memory: copied into its slots in several pieces, or
// between the vectors themselves in pieces claimed by whichever rank comes first), against a
// serial reduction. Every rank must end with the same bits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "tests/unit/train/collective_harness.h"
#include "train/src/collective.h"
#include "train/src/cross_memory.h"
#include "train/src/shm_region.h"

namespace orrery::train {
namespace {

using test_support::ErrorsText;
using test_support::GroupContext;
using test_support::LocalGroup;
using test_support::MakeInput;
using test_support::SerialReduce;

const char* OpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "kSum";
    case ReduceOp::kProduct:
      return "kProduct";
    case ReduceOp::kMin:
      return "kMin";
    case ReduceOp::kMax:
      return "kMax";
    case ReduceOp::kAvg:
      return "kAvg";
  }
  return "?";
}

constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax,
                                ReduceOp::kAvg};

// Elements in a vector of about 5 MB: above kRingThresholdBytes, several kChunkBytes per
// ring segment even for N = 4, odd and not a multiple of 3 (so never a multiple of N).
template <typename T>
size_t LargeCount() {
  return 5 * 1024 * 1024 / sizeof(T) + 3;
}
constexpr size_t kSmallCount = 37;

// All-reduces MakeInput's vectors on every rank of `g` and compares with SerialReduce.
template <typename T>
void ExpectAllReduce(LocalGroup& g, size_t count, ReduceOp op, uint32_t seed) {
  SCOPED_TRACE(std::string("dtype size ") + std::to_string(sizeof(T)) +
               (std::is_floating_point_v<T> ? " float" : " int") + ", op " + OpName(op) +
               ", count " + std::to_string(count) + ", N " + std::to_string(g.size()));
  const int n = g.size();
  std::vector<std::vector<T>> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(MakeInput<T>(r, count, op, seed));
  std::vector<std::vector<T>> outputs = inputs;
  auto errors = g.Run([&](int r, CollectiveGroup& group) {
    GroupContext ctx(&group);
    ctx.AllReduce(outputs[size_t(r)], op);
  });
  ASSERT_EQ(ErrorsText(errors), "");
  for (int r = 1; r < n; ++r) {
    ASSERT_EQ(outputs[size_t(r)].size(), count);
    if (count == 0) continue;
    EXPECT_EQ(std::memcmp(outputs[size_t(r)].data(), outputs[0].data(), count * sizeof(T)), 0)
        << "rank " << r << " does not hold the same bits as rank 0";
  }
  const std::vector<T> expected = SerialReduce(inputs, op);
  const bool exact = !std::is_floating_point_v<T> || op == ReduceOp::kMin || op == ReduceOp::kMax;
  const double tol = sizeof(T) == 4 ? 1e-5 : 1e-12;
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < count; ++i) {
    const double want = double(expected[i]), got = double(outputs[0][i]);
    const bool ok =
        exact ? expected[i] == outputs[0][i] : std::fabs(got - want) <= tol * (1 + std::fabs(want));
    if (!ok && wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0u) << "first wrong element " << first << ": got " << double(outputs[0][first])
                       << ", want " << double(expected[first]);
}

// Shared memory needs a writable /dev/shm (and is off under ORRERY_COLLECTIVE_SHM=0).
bool SharedMemoryUsable() {
  const char* env = std::getenv("ORRERY_COLLECTIVE_SHM");
  if (env != nullptr && std::string(env) == "0") return false;
  ShmRegion probe;
  return probe.Create(4096).ok();
}

// Between vectors needs process_vm_readv and process_vm_writev (here: on this process).
bool CrossMemoryUsable() {
  const char* env = std::getenv("ORRERY_COLLECTIVE_CMA");
  if (env != nullptr && std::string(env) == "0") return false;
  uint64_t word = 7, seen = 0;
  return ReadOtherProcess(getpid(), uint64_t(reinterpret_cast<uintptr_t>(&word)), &seen, 8) &&
         seen == 7;
}

enum Path { kRing, kSharedCopy, kBetweenVectors };

// (N, path wanted)
class AllReduceTest : public ::testing::TestWithParam<std::tuple<int, Path>> {
 protected:
  void SetUp() override {
    if (Shm() && !SharedMemoryUsable()) GTEST_SKIP() << "no usable /dev/shm";
    if (Cross() && !CrossMemoryUsable()) GTEST_SKIP() << "no process_vm_readv here";
  }
  int N() const { return std::get<0>(GetParam()); }
  bool Shm() const { return std::get<1>(GetParam()) != kRing; }
  bool Cross() const { return std::get<1>(GetParam()) == kBetweenVectors; }

  template <typename T>
  void AllOpsAndSizes() {
    LocalGroup g(N(), /*timeout_s=*/60, Shm(), Cross());
    uint32_t seed = 1;
    for (ReduceOp op : kAllOps) {
      ExpectAllReduce<T>(g, kSmallCount, op, seed++);
      ASSERT_NE(LargeCount<T>() % size_t(N()), 0u);
      ExpectAllReduce<T>(g, LargeCount<T>(), op, seed++);
      for (int r = 0; r < N(); ++r) {
        EXPECT_EQ(g.group(r).UsesSharedMemory(), Shm()) << "rank " << r;
        EXPECT_EQ(g.group(r).UsesCrossMemory(), Cross()) << "rank " << r;
      }
    }
  }
};

TEST_P(AllReduceTest, Float) { AllOpsAndSizes<float>(); }
TEST_P(AllReduceTest, Double) { AllOpsAndSizes<double>(); }
TEST_P(AllReduceTest, Int32) { AllOpsAndSizes<int32_t>(); }
TEST_P(AllReduceTest, Int64) { AllOpsAndSizes<int64_t>(); }

// Vectors just below, at and above the ring threshold, one element and none: the serial
// result too, whichever path each takes.
TEST_P(AllReduceTest, SizesAroundTheRingThreshold) {
  LocalGroup g(N(), 60, Shm(), Cross());
  const size_t at = CollectiveGroup::kRingThresholdBytes / sizeof(double);
  uint32_t seed = 100;
  for (size_t count : {at - 1, at, at + 1, size_t(1), size_t(0)}) {
    ExpectAllReduce<double>(g, count, ReduceOp::kSum, seed++);
    ExpectAllReduce<int32_t>(g, count, ReduceOp::kMax, seed++);
  }
}

std::string ParamName(const ::testing::TestParamInfo<std::tuple<int, Path>>& info) {
  const char* path[] = {"Ring", "SharedMemory", "BetweenVectors"};
  return "N" + std::to_string(std::get<0>(info.param)) + path[std::get<1>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Groups, AllReduceTest,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values(kRing, kSharedCopy, kBetweenVectors)),
                         ParamName);

// One worker that may not reach the others' memory (here: told not to; on a host, a kernel
// that refuses it) makes the whole group copy through the shared region, with the same
// results; and many calls in a row between vectors (the piece counter only grows) stay right.
TEST(AllReduceBetweenVectors, OneWorkerWithoutItMakesAllCopy) {
  if (!SharedMemoryUsable() || !CrossMemoryUsable()) GTEST_SKIP() << "no shared memory here";
  LocalGroup g(3, 60, /*shared_memory=*/true, /*cross_memory=*/true);
  g.group(1).SetCrossMemory(false);
  ExpectAllReduce<float>(g, LargeCount<float>(), ReduceOp::kSum, 7);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(g.group(r).UsesSharedMemory()) << "rank " << r;
    EXPECT_FALSE(g.group(r).UsesCrossMemory()) << "rank " << r;
  }
}

// One worker that does not want shared memory at all makes the whole group go round the
// ring: every worker takes part in every agreement, so none is left a collective behind.
TEST(AllReduceBetweenVectors, OneWorkerWithoutSharedMemoryMakesAllUseTheRing) {
  LocalGroup g(3, /*timeout_s=*/20, /*shared_memory=*/true, /*cross_memory=*/true);
  g.group(2).SetSharedMemory(false);
  ExpectAllReduce<double>(g, LargeCount<double>(), ReduceOp::kSum, 11);
  ExpectAllReduce<int64_t>(g, LargeCount<int64_t>(), ReduceOp::kMax, 12);
  for (int r = 0; r < 3; ++r) EXPECT_FALSE(g.group(r).UsesSharedMemory()) << "rank " << r;
}

TEST(AllReduceBetweenVectors, ManyCallsInARow) {
  if (!SharedMemoryUsable() || !CrossMemoryUsable()) GTEST_SKIP() << "no shared memory here";
  LocalGroup g(4, 60, /*shared_memory=*/true, /*cross_memory=*/true);
  const size_t counts[] = {CollectiveGroup::kRingThresholdBytes / 4 + 1, 3 << 20, 70001};
  for (uint32_t call = 0; call < 12; ++call)
    ExpectAllReduce<int32_t>(g, counts[call % 3], call % 2 ? ReduceOp::kMax : ReduceOp::kSum, call);
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(g.group(r).UsesCrossMemory()) << "rank " << r;
}

TEST(AllReduceSingleWorker, LeavesSumAndDividesAvgByOne) {
  LocalGroup g(1);
  std::vector<double> v{1.5, -2.0, 3.25};
  std::vector<int64_t> w{7, -9};
  auto errors = g.Run([&](int, CollectiveGroup& group) {
    GroupContext ctx(&group);
    ctx.AllReduce(v, ReduceOp::kSum);
    ctx.AllReduce(w, ReduceOp::kAvg);
    ctx.Barrier();
  });
  ASSERT_EQ(ErrorsText(errors), "");
  EXPECT_EQ(v, (std::vector<double>{1.5, -2.0, 3.25}));
  EXPECT_EQ(w, (std::vector<int64_t>{7, -9}));
}

TEST(AllReduceInt, AvgTruncatesLikeIntegerDivision) {
  LocalGroup g(3);
  std::vector<std::vector<int32_t>> v{{1, -1, 10}, {1, -1, 0}, {0, -1, 0}};
  auto errors = g.Run([&](int r, CollectiveGroup& group) {
    GroupContext ctx(&group);
    ctx.AllReduce(v[size_t(r)], ReduceOp::kAvg);
  });
  ASSERT_EQ(ErrorsText(errors), "");
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(v[size_t(r)], (std::vector<int32_t>{0, -1, 3})) << "rank " << r;
}

}  // namespace
}  // namespace orrery::train
