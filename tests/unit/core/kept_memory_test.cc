// Freed memory kept for the next large values (core/internal/kept_memory.h): a block freed and
// allocated again is not faulted in again, and what is kept goes back to the kernel once no
// large copy has been made for kKeptMemoryIdleS, or when keeping stops. Skipped where keeping is
// off (a sanitizer's allocator, ORRERY_KEEP_FREED_MEMORY=0, GLIBC_TUNABLES of the user's, a C
// library other than glibc).
#include "core/internal/kept_memory.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "orrery/api/serialize.h"

namespace orrery::internal {
namespace {

constexpr size_t kBlock = size_t{128} << 20;

long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Resident bytes of this process (/proc/self/statm).
size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t total = 0, resident = 0;
  statm >> total >> resident;
  return resident * size_t(sysconf(_SC_PAGESIZE));
}

// Memory in use as the test says (the fraction `used` of 16 GiB); `fail` reads nothing.
class FakeUsage final : public MemoryReader {
 public:
  explicit FakeUsage(double used, bool fail = false) : used_(used), fail_(fail) {}
  Result<MemoryUsage> Read() override {
    if (fail_) return Status::Unavailable("no memory figures here");
    MemoryUsage u;
    u.total_bytes = int64_t{16} << 30;
    u.used_bytes = int64_t(used_ * double(u.total_bytes));
    u.source = "host";
    return u;
  }

 private:
  double used_;
  bool fail_;
};

// Allocates and writes a large block, then frees it.
void UseAndFree(size_t n) {
  auto* p = static_cast<char*>(std::malloc(n));
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, n);
  // The write must happen: the compiler may not drop a memset whose result is read.
  volatile char seen = p[n / 2];
  ASSERT_EQ(seen, 1);
  std::free(p);
}

TEST(KeptMemoryTest, ABlockFreedAndAllocatedAgainFaultsInNoNewPages) {
  if (!KeepFreedMemory()) GTEST_SKIP() << "freed memory is not kept in this process";
  UseAndFree(kBlock);
  long before = MinorFaults();
  UseAndFree(kBlock);
  // A block mapped afresh faults in 64 pages of 2 MiB at least (32,768 of 4 KiB).
  EXPECT_LT(MinorFaults() - before, 16);
}

TEST(KeptMemoryTest, WhatIsKeptGoesBackOnceNoLargeCopyIsMadeForAWhile) {
  if (!KeepFreedMemory()) GTEST_SKIP() << "freed memory is not kept in this process";
  UseAndFree(kBlock);
  size_t kept = ResidentBytes();
  KeptMemoryReleaser releaser(std::make_unique<FakeUsage>(0.5));
  double t = 1000;
  EXPECT_FALSE(releaser.Tick(t));  // the first look only counts the copies
  NoteLargeCopy();
  EXPECT_FALSE(releaser.Tick(t + kKeptMemoryIdleS));        // a copy since: still in use
  EXPECT_FALSE(releaser.Tick(t + kKeptMemoryIdleS * 1.5));  // too soon to look again
  EXPECT_GE(ResidentBytes() + kBlock / 2, kept) << "the freed block was given back early";
  EXPECT_TRUE(releaser.Tick(t + kKeptMemoryIdleS * 2));  // none for a whole period
  EXPECT_LE(ResidentBytes() + kBlock / 2, kept) << "the freed block is still resident";
  EXPECT_FALSE(releaser.Tick(t + kKeptMemoryIdleS * 3));  // nothing freed since
}

TEST(KeptMemoryTest, WhileMemoryRunsShortWhatIsKeptGoesBackAtOnce) {
  if (!KeepFreedMemory()) GTEST_SKIP() << "freed memory is not kept in this process";
  double t = 1000;
  // Memory figures that cannot be read, or plenty free: kept while copies are made.
  for (bool fail : {true, false}) {
    KeptMemoryReleaser releaser(std::make_unique<FakeUsage>(kKeptMemoryPressure - 0.05, fail));
    UseAndFree(kBlock);
    size_t kept = ResidentBytes();
    for (int i = 0; i < 3; ++i, t += kKeptMemoryIdleS) {
      NoteLargeCopy();
      EXPECT_FALSE(releaser.Tick(t));
    }
    EXPECT_GE(ResidentBytes() + kBlock / 2, kept) << "the freed block was given back";
  }
  // Short: given back on the first look, copies or not, and looked at again a second later.
  KeptMemoryReleaser releaser(std::make_unique<FakeUsage>(kKeptMemoryPressure + 0.05));
  UseAndFree(kBlock);
  size_t kept = ResidentBytes();
  NoteLargeCopy();
  EXPECT_TRUE(releaser.Tick(t));
  EXPECT_LE(ResidentBytes() + kBlock / 2, kept) << "the freed block is still resident";
  UseAndFree(kBlock);
  NoteLargeCopy();
  EXPECT_FALSE(releaser.Tick(t + kKeptMemoryPressureCheckS / 2)) << "looked again too soon";
  EXPECT_TRUE(releaser.Tick(t + kKeptMemoryPressureCheckS));
}

TEST(KeptMemoryTest, StoppingGivesWhatWasKeptBackAndMapsLargeBlocksApartAgain) {
  if (!KeepFreedMemory()) GTEST_SKIP() << "freed memory is not kept in this process";
  UseAndFree(kBlock);
  size_t kept = ResidentBytes();
  StopKeepingFreedMemory();
  EXPECT_LE(ResidentBytes() + kBlock / 2, kept) << "the freed block is still resident";
  UseAndFree(kBlock);
  long before = MinorFaults();
  UseAndFree(kBlock);
  EXPECT_GE(MinorFaults() - before, 64) << "a block freed after the stop was kept";
  EXPECT_TRUE(KeepFreedMemory()) << "keeping turns on again";
}

// What the landing tests below land: 32 MiB, a large value.
constexpr size_t kValue = size_t{32} << 20;
const std::vector<uint8_t>& LandedSource() {
  static const std::vector<uint8_t> src(kValue, 5);
  return src;
}

// The room a large value landed in (a new vector: AssignFresh), once the value is let go, is
// taken back (ReclaimLandings) and given to the next large value, whatever is allocated in
// between: here a block of the same size, which the freed room would otherwise fit exactly
// (small blocks carve it the same way). Before, the next value landed in new memory.
TEST(KeptMemoryTest, TheRoomOfAValueLetGoIsTheNextValuesWhateverIsAllocatedBetween) {
  if (!KeepFreedMemory()) GTEST_SKIP() << "freed memory is not kept in this process";
  const std::vector<uint8_t>& src = LandedSource();
  std::vector<uint8_t> first;
  ASSERT_TRUE(AssignFresh(first, src.data(), kValue)) << "no fresh landing under a sanitizer";
  const uint8_t* room = first.data();
  first = std::vector<uint8_t>();  // the call lets its argument go
  ReclaimLandings();
  EXPECT_EQ(ParkedLandingBytes(), kValue);
  std::unique_ptr<char[]> between(new char[kValue]);
  EXPECT_NE(static_cast<void*>(between.get()), room) << "the room was not held";
  std::vector<uint8_t> second;
  ASSERT_TRUE(AssignFresh(second, src.data(), kValue));
  // The same room, or one that starts a little before it (merged with a free neighbour).
  auto apart =
      std::abs(reinterpret_cast<intptr_t>(second.data()) - reinterpret_cast<intptr_t>(room));
  EXPECT_LT(apart, intptr_t{1} << 20) << "the next value landed in new memory";
  EXPECT_EQ(ParkedLandingBytes(), 0u);
  EXPECT_EQ(second[kValue / 2], 5);

  // A value the user keeps is left alone; what is parked goes back with what is kept.
  ReclaimLandings();
  EXPECT_EQ(ParkedLandingBytes(), 0u);
  EXPECT_EQ(second[kValue - 1], 5);
  second = std::vector<uint8_t>();
  ASSERT_TRUE(AssignFresh(first, src.data(), kValue));
  first = std::vector<uint8_t>();
  ReclaimLandings();
  EXPECT_EQ(ParkedLandingBytes(), kValue);
  StopKeepingFreedMemory();
  EXPECT_EQ(ParkedLandingBytes(), 0u);
  EXPECT_TRUE(KeepFreedMemory());
}

// An argument a call returns as its result is one room, noted once, as a result's: the next
// call's user code gets it (MakeRoomForUserCode), as it would a result's.
TEST(KeptMemoryTest, AnArgumentReturnedAsTheResultIsOneRoomAResults) {
  if (!KeepFreedMemory()) GTEST_SKIP() << "freed memory is not kept in this process";
  const std::vector<uint8_t>& src = LandedSource();
  std::vector<uint8_t> echoed;
  ASSERT_TRUE(AssignFresh(echoed, src.data(), kValue)) << "no fresh landing under a sanitizer";
  NoteRoomLetGo(echoed);
  echoed = std::vector<uint8_t>();
  ReclaimLandings();
  EXPECT_EQ(ParkedLandingBytes(), kValue);
  MakeRoomForUserCode();
  EXPECT_EQ(ParkedLandingBytes(), 0u) << "parked as an argument's room, not a result's";
  ReclaimLandings();  // noted again: parked again, the user code having left it free
  EXPECT_EQ(ParkedLandingBytes(), kValue);
  MakeRoomForLanding();
  EXPECT_EQ(ParkedLandingBytes(), 0u);
}

TEST(KeptMemoryTest, TheUsersTunablesWinOneByOne) {
  EXPECT_EQ(MergeTunables(nullptr, kWorkerTunables), kWorkerTunables);
  EXPECT_EQ(MergeTunables("", kHugePageTunables), kHugePageTunables);
  EXPECT_EQ(MergeTunables("glibc.malloc.arena_max=4", kWorkerTunables),
            "glibc.malloc.arena_max=4:glibc.malloc.hugetlb=1");
  EXPECT_EQ(MergeTunables("glibc.malloc.hugetlb=0:glibc.malloc.arena_max=2", kWorkerTunables),
            "glibc.malloc.hugetlb=0:glibc.malloc.arena_max=2");
  EXPECT_EQ(MergeTunables("glibc.rtld.nns=8:", kHugePageTunables),
            "glibc.rtld.nns=8:glibc.malloc.hugetlb=1");
  // A name is matched whole: a longer one that starts the same is another tunable.
  EXPECT_EQ(MergeTunables("glibc.malloc.hugetlb_x=1", kHugePageTunables),
            "glibc.malloc.hugetlb_x=1:glibc.malloc.hugetlb=1");
  // An entry without '=' is kept as it is (glibc ignores it) and names itself.
  EXPECT_EQ(MergeTunables("junk::", kHugePageTunables), "junk::glibc.malloc.hugetlb=1");
}

TEST(KeptMemoryTest, WorkersGetNoSingleArenaWhereTheUserChoseHowMallocMapsMemory) {
  if (!KeepFreedMemoryWanted()) GTEST_SKIP() << "ORRERY_KEEP_FREED_MEMORY=0 here";
  EXPECT_EQ(WorkerTunables(nullptr), kWorkerTunables);
  EXPECT_EQ(WorkerTunables("glibc.malloc.tcache_count=0"),
            std::string("glibc.malloc.tcache_count=0:") + kWorkerTunables);
  // The workers keep nothing then (KeepFreedMemory), so one arena would only serialise them.
  EXPECT_EQ(WorkerTunables("glibc.malloc.mmap_threshold=65536"),
            "glibc.malloc.mmap_threshold=65536:glibc.malloc.hugetlb=1");
  EXPECT_EQ(WorkerTunables("glibc.malloc.trim_threshold=0"),
            "glibc.malloc.trim_threshold=0:glibc.malloc.hugetlb=1");
}

}  // namespace
}  // namespace orrery::internal
