// ReadOtherProcess / WriteOtherProcess against this process and a forked child, unreachable
// memory and a process that is gone; CrossMemoryReducer against a serial fold, and naming the
// rank whose vector it cannot reach.
#include "train/src/cross_memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace orrery::train {
namespace {

uint64_t Address(const void* p) { return uint64_t(reinterpret_cast<uintptr_t>(p)); }

// Whether this machine lets a process use process_vm_readv at all (seccomp may not).
bool Usable() {
  uint64_t word = 42, seen = 0;
  return ReadOtherProcess(getpid(), Address(&word), &seen, sizeof(seen)) && seen == 42;
}

TEST(CrossMemory, ReadsAndWritesAnAddress) {
  if (!Usable()) GTEST_SKIP() << "process_vm_readv is refused here";
  std::vector<uint32_t> there(100000), here(100000);
  for (size_t i = 0; i < there.size(); ++i) there[i] = uint32_t(i * 2654435761u);
  ASSERT_TRUE(ReadOtherProcess(getpid(), Address(there.data()), here.data(), 400000));
  EXPECT_EQ(here, there);
  here.assign(here.size(), 7);
  ASSERT_TRUE(WriteOtherProcess(getpid(), here.data(), Address(there.data() + 10), 4));
  EXPECT_EQ(there[10], 7u);
  EXPECT_EQ(there[11], uint32_t(11 * 2654435761u));
  EXPECT_TRUE(ReadOtherProcess(getpid(), Address(there.data()), here.data(), 0));
}

// What the kernel cannot reach is a false, never a crash: an unmapped page, a read-only
// page to write, a process that no longer exists.
TEST(CrossMemory, UnreachableMemoryIsAFailure) {
  if (!Usable()) GTEST_SKIP() << "process_vm_readv is refused here";
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  void* gone = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(gone, MAP_FAILED);
  ASSERT_EQ(munmap(gone, page), 0);
  char buf[64] = {};
  EXPECT_FALSE(ReadOtherProcess(getpid(), Address(gone), buf, sizeof(buf)));
  EXPECT_FALSE(WriteOtherProcess(getpid(), buf, Address(gone), sizeof(buf)));
  EXPECT_FALSE(ReadOtherProcess(getpid(), 0, buf, sizeof(buf)));

  void* ro = mmap(nullptr, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(ro, MAP_FAILED);
  EXPECT_TRUE(ReadOtherProcess(getpid(), Address(ro), buf, sizeof(buf)));
  EXPECT_FALSE(WriteOtherProcess(getpid(), buf, Address(ro), sizeof(buf)));
  munmap(ro, page);

  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_FALSE(ReadOtherProcess(child, Address(buf), buf, sizeof(buf)));
}

// The copy is the child's own memory, not this process's: the child sees the word written
// into it, and this process's word at the same address keeps its value.
TEST(CrossMemory, WritesIntoAnotherProcess) {
  if (!Usable()) GTEST_SKIP() << "process_vm_readv is refused here";
  uint64_t word = 1;
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c;
    close(go[1]);
    if (read(go[0], &c, 1) != 1) _exit(3);
    _exit(word == 0x5eed ? 0 : 4);
  }
  close(go[0]);
  const uint64_t seed = 0x5eed;
  uint64_t seen = 0;
  bool read_ok = ReadOtherProcess(child, Address(&word), &seen, sizeof(seen));
  bool wrote = WriteOtherProcess(child, &seed, Address(&word), sizeof(seed));
  ASSERT_EQ(write(go[1], "x", 1), 1);
  close(go[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  if (!read_ok && errno == EPERM) GTEST_SKIP() << "this kernel lets only ancestors reach a process";
  EXPECT_TRUE(read_ok && wrote);
  EXPECT_EQ(seen, 1u);
  EXPECT_EQ(word, 1u);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child did not see the word written into it";
}

// Three workers' vectors in this process: whichever rank reduces a range, every vector ends
// with the rank-order fold of that range, bit for bit, and nothing outside it changes.
TEST(CrossMemoryReducer, EveryVectorGetsTheRankOrderFold) {
  if (!Usable()) GTEST_SKIP() << "process_vm_readv is refused here";
  const size_t count = 300001;  // several chunks, the last one short
  std::vector<std::vector<float>> v(3, std::vector<float>(count));
  for (size_t r = 0; r < 3; ++r)
    for (size_t i = 0; i < count; ++i) v[r][i] = 0.1f * float(r + 1) + 1e-3f * float(i % 977);
  std::vector<float> want(count);
  for (size_t i = 0; i < count; ++i) want[i] = (v[0][i] + v[1][i]) + v[2][i];
  std::vector<PeerVector> vectors;
  for (auto& x : v) vectors.push_back({getpid(), Address(x.data())});
  CrossMemoryReducer reducer(3);
  const size_t split = 123457 * sizeof(float);
  // Rank 1 reduces the front, rank 2 the back (begin and end at element boundaries).
  ASSERT_EQ(
      reducer.Reduce(reinterpret_cast<char*>(v[1].data()), 0, split, 1, vectors, 0, ReduceOp::kSum),
      "");
  ASSERT_EQ(reducer.Reduce(reinterpret_cast<char*>(v[2].data()), split, count * sizeof(float), 2,
                           vectors, 0, ReduceOp::kSum),
            "");
  for (size_t r = 0; r < 3; ++r)
    EXPECT_EQ(std::memcmp(v[r].data(), want.data(), count * sizeof(float)), 0) << "rank " << r;
}

TEST(CrossMemoryReducer, NamesTheRankItCannotReach) {
  if (!Usable()) GTEST_SKIP() << "process_vm_readv is refused here";
  std::vector<int64_t> mine(5000, 1), theirs(5000, 2);
  CrossMemoryReducer reducer(3);
  std::vector<PeerVector> vectors{
      {getpid(), Address(mine.data())}, {getpid(), Address(theirs.data())}, {getpid(), 8}};
  std::string error = reducer.Reduce(reinterpret_cast<char*>(mine.data()), 0, 5000 * 8, 0, vectors,
                                     3, ReduceOp::kMax);
  EXPECT_THAT(error, ::testing::HasSubstr("cannot read rank 2's vector"));
  // A process that is gone: the same, by its rank.
  vectors[2] = {getpid(), Address(theirs.data())};
  vectors[1].pid = 0x3fffffff;
  error = reducer.Reduce(reinterpret_cast<char*>(mine.data()), 0, 5000 * 8, 0, vectors, 3,
                         ReduceOp::kMax);
  EXPECT_THAT(error, ::testing::HasSubstr("rank 1"));
}

}  // namespace
}  // namespace orrery::train
