// The node's memory monitor (node/src/memory_monitor.h): parsing /proc/meminfo and the
// cgroup files (from strings and from a fake sysroot on disk), the choice of the worker to
// kill, the OutOfMemoryError text, and the threshold.
#include "node/src/memory_monitor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/fakes/temp_dir.h"

namespace orrery::node {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t(1) << 30;

const char* const kMeminfo =
    "MemTotal:       16777216 kB\n"
    "MemFree:         1048576 kB\n"
    "MemAvailable:    4194304 kB\n"
    "Buffers:          262144 kB\n"
    "Cached:          2097152 kB\n"
    "SwapCached:            0 kB\n"
    "HugePages_Total:       0\n";

TEST(ParseMeminfo, UsedIsTotalMinusAvailable) {
  auto u = ParseMeminfo(kMeminfo);
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->total_bytes, 16 * kGiB);
  EXPECT_EQ(u->used_bytes, 12 * kGiB);
  EXPECT_EQ(u->source, "host");
  EXPECT_DOUBLE_EQ(u->Fraction(), 0.75);
}

TEST(ParseMeminfo, WithoutMemAvailableFreeBuffersAndCachedAreAvailable) {
  auto u = ParseMeminfo(
      "MemTotal: 16777216 kB\nMemFree: 1048576 kB\nBuffers: 1048576 kB\nCached: 2097152 kB\n");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->used_bytes, 12 * kGiB);
}

TEST(ParseMeminfo, MalformedOrHostileTextIsAnErrorNotACrash) {
  EXPECT_FALSE(ParseMeminfo("").ok());
  EXPECT_FALSE(ParseMeminfo("MemFree: 10 kB\n").ok()) << "no MemTotal";
  EXPECT_FALSE(ParseMeminfo("MemTotal: 0 kB\nMemAvailable: 0 kB\n").ok());
  EXPECT_FALSE(ParseMeminfo("MemTotal: -5 kB\nMemAvailable: 1 kB\n").ok());
  EXPECT_FALSE(ParseMeminfo("MemTotal: 12x kB\nMemAvailable: 1 kB\n").ok());
  EXPECT_FALSE(ParseMeminfo("MemTotal: 16 MB\nMemAvailable: 1 kB\n").ok()) << "unknown unit";
  EXPECT_FALSE(ParseMeminfo("MemTotal: 99999999999999999999999 kB\nMemAvailable: 1 kB\n").ok())
      << "overflow";
  EXPECT_FALSE(ParseMeminfo("MemTotal: 9223372036854775807 kB\nMemAvailable: 1 kB\n").ok())
      << "overflow in bytes";
  EXPECT_FALSE(ParseMeminfo("MemTotal: 100 kB\n").ok()) << "nothing says what is free";
  EXPECT_FALSE(ParseMeminfo(std::string(100000, 'M')).ok()) << "too long";
  // Huge but representable values saturate instead of overflowing.
  auto big = ParseMeminfo(
      "MemTotal: 9007199254740991 kB\nMemFree: 9007199254740991 kB\n"
      "Buffers: 9007199254740991 kB\nCached: 9007199254740991 kB\n");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->used_bytes, 0);
  // More available than total (a torn read) is 0 used, never negative.
  auto torn = ParseMeminfo("MemTotal: 100 kB\nMemAvailable: 200 kB\n");
  ASSERT_TRUE(torn.ok());
  EXPECT_EQ(torn->used_bytes, 0);
}

TEST(ParseCgroup, V2LimitAndUsageLessInactiveFile) {
  auto u =
      ParseCgroup("4294967296\n", "3221225472\n",
                  "anon 1000\nfile 2000\ninactive_file 1073741824\nactive_file 5\n", "cgroup v2");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->total_bytes, 4 * kGiB);
  EXPECT_EQ(u->used_bytes, 2 * kGiB);
  EXPECT_EQ(u->source, "cgroup v2");
}

TEST(ParseCgroup, V1UsesTheHierarchysTotalInactiveFile) {
  auto u = ParseCgroup("4294967296", "3221225472",
                       "inactive_file 5\ntotal_inactive_file 1073741824\n", "cgroup v1");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->used_bytes, 2 * kGiB);
}

TEST(ParseCgroup, NoLimitIsNotFound) {
  EXPECT_EQ(ParseCgroup("max\n", "100", "", "cgroup v2").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ParseCgroup("9223372036854771712\n", "100", "", "cgroup v1").status().code(),
            StatusCode::kNotFound);
}

TEST(ParseCgroup, MalformedValuesAreInvalidArgument) {
  EXPECT_EQ(ParseCgroup("", "1", "", "cgroup v2").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseCgroup("0", "1", "", "cgroup v2").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseCgroup("-1", "1", "", "cgroup v2").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseCgroup("100", "lots", "", "cgroup v2").status().code(),
            StatusCode::kInvalidArgument);
  // A stat whose inactive_file exceeds usage cannot make usage negative.
  auto u = ParseCgroup("100", "10", "inactive_file 50\n", "cgroup v2");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->used_bytes, 0);
}

TEST(Tighter, TheLargerFractionInUseWins) {
  MemoryUsage host{12 * kGiB, 16 * kGiB, "host"};
  MemoryUsage cgroup{3 * kGiB, 4 * kGiB, "cgroup v2"};
  EXPECT_EQ(Tighter(host, cgroup).source, "host");  // 75% = 75%: the first stays
  cgroup.used_bytes = int64_t(3.9 * double(kGiB));
  EXPECT_EQ(Tighter(host, cgroup).source, "cgroup v2");
  EXPECT_EQ(Tighter(MemoryUsage{}, cgroup).source, "cgroup v2");
  EXPECT_EQ(Tighter(host, MemoryUsage{}).source, "host");
}

// ------------------------------------------------------------------ a fake sysroot on disk

class FakeSysroot : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(root_.path().empty()) << "mkdtemp failed"; }
  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root_.path() + path).parent_path());
    std::ofstream(root_.path() + path) << text;
  }
  orrery::testing::TempDir root_{"orrery_memmon_test"};
};

TEST_F(FakeSysroot, HostOnly) {
  Write("/proc/meminfo", kMeminfo);
  auto u = SystemMemoryReader(root_.path()).Read();
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->source, "host");
  EXPECT_EQ(u->used_bytes, 12 * kGiB);
  EXPECT_EQ(u->total_bytes, 16 * kGiB);
}

TEST_F(FakeSysroot, CgroupV2LimitBindsWhenCloserToFull) {
  Write("/proc/meminfo", kMeminfo);  // 75% of the host
  Write("/sys/fs/cgroup/memory.max", "2147483648\n");
  Write("/sys/fs/cgroup/memory.current", "2040109465\n");  // 95% of 2 GiB
  Write("/sys/fs/cgroup/memory.stat", "inactive_file 0\n");
  auto u = SystemMemoryReader(root_.path()).Read();
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->source, "cgroup v2");
  EXPECT_EQ(u->total_bytes, 2 * kGiB);
  EXPECT_EQ(u->used_bytes, 2040109465);
}

TEST_F(FakeSysroot, CgroupV2WithoutLimitLeavesTheHost) {
  Write("/proc/meminfo", kMeminfo);
  Write("/sys/fs/cgroup/memory.max", "max\n");
  Write("/sys/fs/cgroup/memory.current", "100\n");
  auto u = SystemMemoryReader(root_.path()).Read();
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->source, "host");
}

TEST_F(FakeSysroot, CgroupV1) {
  Write("/proc/meminfo", kMeminfo);
  Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "1073741824\n");
  Write("/sys/fs/cgroup/memory/memory.usage_in_bytes", "1073741824\n");
  Write("/sys/fs/cgroup/memory/memory.stat", "total_inactive_file 107374182\n");
  auto u = SystemMemoryReader(root_.path()).Read();
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->source, "cgroup v1");
  EXPECT_EQ(u->total_bytes, kGiB);
  EXPECT_EQ(u->used_bytes, kGiB - 107374182);
}

TEST(CgroupAncestors, FromProcSelfCgroup) {
  const char* hybrid = "9:name=systemd:/\n4:cpu,memory:/process_api/abc\n0::/user.slice/app\n";
  EXPECT_EQ(CgroupAncestors(hybrid, false),
            (std::vector<std::string>{"/process_api/abc", "/process_api", ""}));
  EXPECT_EQ(CgroupAncestors(hybrid, true),
            (std::vector<std::string>{"/user.slice/app", "/user.slice", ""}));
  EXPECT_EQ(CgroupAncestors("0::/\n", true), (std::vector<std::string>{""}));
  EXPECT_EQ(CgroupAncestors("", true), (std::vector<std::string>{""}));
  EXPECT_EQ(CgroupAncestors("0::/a/../../etc\n", true), (std::vector<std::string>{""}))
      << "no escaping the mount";
  EXPECT_EQ(CgroupAncestors("0::relative\n", true), (std::vector<std::string>{""}));
  std::string deep = "0::";
  for (int i = 0; i < 100; ++i) deep += "/d";
  EXPECT_EQ(CgroupAncestors(deep, true), (std::vector<std::string>{""})) << "too deep";
}

TEST_F(FakeSysroot, ALimitOnAnAncestorCgroupApplies) {
  Write("/proc/meminfo", kMeminfo);  // 75% of the host
  Write("/proc/self/cgroup", "0::/ctr/app\n");
  Write("/sys/fs/cgroup/ctr/app/memory.max", "max\n");
  Write("/sys/fs/cgroup/ctr/app/memory.current", "100\n");
  Write("/sys/fs/cgroup/ctr/memory.max", "1073741824\n");
  Write("/sys/fs/cgroup/ctr/memory.current", "1020054732\n");  // 95%
  auto u = SystemMemoryReader(root_.path()).Read();
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->source, "cgroup v2");
  EXPECT_EQ(u->total_bytes, kGiB);
}

TEST_F(FakeSysroot, CgroupV1OfThisProcess) {
  Write("/proc/meminfo", kMeminfo);
  Write("/proc/self/cgroup", "4:memory:/process_api/abc\n0::/\n");
  Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");  // the root: none
  Write("/sys/fs/cgroup/memory/memory.usage_in_bytes", "1\n");
  Write("/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes", "2147483648\n");
  Write("/sys/fs/cgroup/memory/process_api/abc/memory.usage_in_bytes", "2147483648\n");
  auto u = SystemMemoryReader(root_.path()).Read();
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->source, "cgroup v1");
  EXPECT_EQ(u->total_bytes, 2 * kGiB);
  EXPECT_EQ(u->used_bytes, 2 * kGiB);
}

TEST_F(FakeSysroot, CgroupWithoutMeminfoStillReads) {
  Write("/sys/fs/cgroup/memory.max", "1073741824\n");
  Write("/sys/fs/cgroup/memory.current", "536870912\n");
  auto u = SystemMemoryReader(root_.path()).Read();
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->source, "cgroup v2");
}

TEST_F(FakeSysroot, NothingReadableIsUnavailable) {
  auto u = SystemMemoryReader(root_.path()).Read();
  EXPECT_EQ(u.status().code(), StatusCode::kUnavailable);
  Write("/proc/meminfo", "garbage\n");
  u = SystemMemoryReader(root_.path()).Read();
  EXPECT_EQ(u.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(u.status().message(), HasSubstr("MemTotal"));
}

TEST(SystemMemoryReader, TheRealHostReads) {
  auto u = SystemMemoryReader("").Read();
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_GT(u->total_bytes, 0);
  EXPECT_LE(u->used_bytes, u->total_bytes);
}

// ------------------------------------------------------------------ the victim

TEST(ChooseOomVictim, NewestRetriableFirst) {
  std::vector<OomCandidate> c = {{"old-retriable", true, 1},
                                 {"newest", false, 9},
                                 {"new-retriable", true, 5},
                                 {"mid", false, 3}};
  EXPECT_EQ(c[ChooseOomVictim(c)].worker_id, "new-retriable");
}

TEST(ChooseOomVictim, ThenNewest) {
  std::vector<OomCandidate> c = {{"a", false, 4}, {"b", false, 7}, {"c", false, 2}};
  EXPECT_EQ(c[ChooseOomVictim(c)].worker_id, "b");
}

TEST(ChooseOomVictim, NoneWhenEmpty) { EXPECT_EQ(ChooseOomVictim({}), -1); }

TEST(ChooseOomVictim, OrderOfCandidatesDoesNotMatter) {
  std::vector<OomCandidate> c = {
      {"new-retriable", true, 5}, {"old-retriable", true, 1}, {"newest", false, 9}};
  EXPECT_EQ(c[ChooseOomVictim(c)].worker_id, "new-retriable");
}

// ------------------------------------------------------------------ the monitor

class FakeReader : public MemoryReader {
 public:
  explicit FakeReader(Result<MemoryUsage>* next) : next_(next) {}
  Result<MemoryUsage> Read() override { return *next_; }

 private:
  Result<MemoryUsage>* next_;
};

TEST(MemoryMonitor, AboveTheThresholdOnly) {
  Result<MemoryUsage> next = MemoryUsage{90, 100, "host"};
  MemoryMonitor m(std::make_unique<FakeReader>(&next), 0.95);
  EXPECT_FALSE(m.Refresh());
  EXPECT_EQ(m.last().used_bytes, 90);
  next = MemoryUsage{95, 100, "host"};
  EXPECT_FALSE(m.Refresh()) << "at the threshold is not above it";
  next = MemoryUsage{96, 100, "host"};
  EXPECT_TRUE(m.Refresh());
  next = Status::Unavailable("no meminfo");
  EXPECT_FALSE(m.Refresh()) << "a failed read never kills";
  EXPECT_EQ(m.last().total_bytes, 0);
  MemoryMonitor full(std::make_unique<FakeReader>(&next), 1.0);
  next = MemoryUsage{100, 100, "host"};
  EXPECT_FALSE(full.Refresh()) << "a threshold of 1 never kills";
}

TEST(OutOfMemoryMessage, NamesTheNodeTheUsageAndTheThreshold) {
  MemoryUsage u{int64_t(15.5 * double(kGiB)), 16 * kGiB, "host"};
  std::string m = OutOfMemoryMessage("0123456789abcdef0123456789abcdef", u, 0.95,
                                     "the worker (pid 42) of actor 77");
  EXPECT_THAT(m, HasSubstr("node 0123456789abcdef0123456789abcdef"));
  EXPECT_THAT(m, HasSubstr("15.50 GiB of 16.00 GiB"));
  EXPECT_THAT(m, HasSubstr("96.9%"));
  EXPECT_THAT(m, HasSubstr("threshold 0.95"));
  EXPECT_THAT(m, HasSubstr("the worker (pid 42) of actor 77"));
  EXPECT_EQ(FormatBytes(512 << 20), "512.0 MiB");
}

}  // namespace
}  // namespace orrery::node
