// The node's shared-memory arena and its offset allocator (objects/internal/shm_arena.h): best-fit
// allocation, coalescing, exhaustion and bad frees; creating, attaching to and rejecting
// arena files (wrong tag, wrong magic, truncated, existing path); removing the arenas of
// creators that ended without removing them.
#include "objects/internal/shm_arena.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>

namespace orrery::objects {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ArenaAllocator, AlignsTo64AndSizeZeroTakes64) {
  ArenaAllocator a(1024);
  EXPECT_EQ(a.Allocate(1), 0u);
  EXPECT_EQ(a.Allocate(0), 64u);
  EXPECT_EQ(a.Allocate(65), 128u);
  EXPECT_EQ(a.used(), 256u);
  EXPECT_EQ(a.capacity(), 1024u);
  EXPECT_EQ(a.largest_free(), 768u);
}

TEST(ArenaAllocator, BestFitPicksTheSmallestRunThatHolds) {
  ArenaAllocator a(1024);
  auto x0 = a.Allocate(64);      // [0, 64)
  auto big = a.Allocate(256);    // [64, 320)
  auto x1 = a.Allocate(64);      // [320, 384)
  auto small = a.Allocate(128);  // [384, 512)
  auto x2 = a.Allocate(64);      // [512, 576); [576, 1024) stays free (448)
  ASSERT_TRUE(x0 && big && x1 && small && x2);
  a.Free(*big);
  a.Free(*small);
  // Free runs: 256 at 64, 128 at 384, 448 at 576.
  EXPECT_EQ(a.Allocate(100), 384u) << "the 128-byte run is the best fit";
  EXPECT_EQ(a.Allocate(200), 64u) << "the 256-byte run is the best fit";
  EXPECT_EQ(a.Allocate(300), 576u);
  EXPECT_EQ(a.largest_free(), 128u);
}

TEST(ArenaAllocator, FragmentationThenCoalescingOnFree) {
  ArenaAllocator a(1024);
  std::vector<uint64_t> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(*a.Allocate(256));
  EXPECT_EQ(a.largest_free(), 0u);
  a.Free(blocks[0]);
  a.Free(blocks[2]);
  EXPECT_EQ(a.used(), 512u);
  EXPECT_EQ(a.largest_free(), 256u);
  EXPECT_FALSE(a.Allocate(512)) << "512 bytes are free but not in one run";
  a.Free(blocks[1]);  // joins both neighbours
  EXPECT_EQ(a.largest_free(), 768u);
  a.Free(blocks[3]);
  EXPECT_EQ(a.largest_free(), 1024u);
  EXPECT_EQ(a.used(), 0u);
  EXPECT_EQ(a.Allocate(1024), 0u) << "the whole space is one run again";
}

TEST(ArenaAllocator, ExhaustionAndOversizedRequests) {
  ArenaAllocator a(4096);
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(a.Allocate(64)) << i;
  EXPECT_FALSE(a.Allocate(0));
  EXPECT_EQ(a.used(), 4096u);
  ArenaAllocator b(4096);
  EXPECT_FALSE(b.Allocate(4097));
  EXPECT_FALSE(b.Allocate(std::numeric_limits<uint64_t>::max())) << "rounding must not wrap";
  EXPECT_FALSE(b.Allocate(std::numeric_limits<uint64_t>::max() - 10));
  EXPECT_EQ(b.used(), 0u);
}

TEST(ArenaAllocator, CapacityNotAMultipleOf64UsesOnlyWholeBlocks) {
  ArenaAllocator a(100);
  EXPECT_EQ(a.Allocate(10), 0u);
  EXPECT_FALSE(a.Allocate(10));
  ArenaAllocator tiny(63);
  EXPECT_FALSE(tiny.Allocate(0));
  EXPECT_EQ(tiny.largest_free(), 0u);
}

TEST(ArenaAllocator, BadFreesAreIgnored) {
  ArenaAllocator a(1024);
  auto x = *a.Allocate(128);
  auto y = *a.Allocate(128);
  a.Free(12345);   // never handed out
  a.Free(x + 64);  // inside an allocation
  a.Free(512);     // inside a free run
  EXPECT_EQ(a.used(), 256u);
  a.Free(x);
  a.Free(x);  // double free
  EXPECT_EQ(a.used(), 128u);
  EXPECT_EQ(a.largest_free(), 768u);
  a.Free(y);
  EXPECT_EQ(a.largest_free(), 1024u);
}

// Random allocations and frees against a model: no two live blocks overlap, used() is their
// sum, and freeing everything leaves one run of the whole capacity.
TEST(ArenaAllocator, RandomOperationsKeepBlocksDisjoint) {
  constexpr uint64_t kCap = 64 * 1024;
  ArenaAllocator a(kCap);
  std::mt19937_64 rng(7);
  std::map<uint64_t, uint64_t> live;  // offset -> rounded size
  uint64_t sum = 0;
  for (int step = 0; step < 5000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      uint64_t size = rng() % 3000;
      auto off = a.Allocate(size);
      if (!off) continue;
      ASSERT_EQ(*off % 64, 0u);
      uint64_t r = *ArenaAllocator::Rounded(size);
      ASSERT_LE(*off + r, kCap);
      auto next = live.lower_bound(*off);
      if (next != live.end()) {
        ASSERT_LE(*off + r, next->first);
      }
      if (next != live.begin()) {
        ASSERT_LE(std::prev(next)->first + std::prev(next)->second, *off);
      }
      live[*off] = r;
      sum += r;
    } else {
      auto it = std::next(live.begin(), long(rng() % live.size()));
      a.Free(it->first);
      sum -= it->second;
      live.erase(it);
    }
    ASSERT_EQ(a.used(), sum);
  }
  for (auto [off, size] : live) a.Free(off);
  EXPECT_EQ(a.used(), 0u);
  EXPECT_EQ(a.largest_free(), kCap);
}

class ShmArenaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string tmpl = base + "/orrery-arena-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/arena";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Overwrites `bytes` at `offset` of the arena file, as a hostile or broken writer would.
  void Poke(uint64_t offset, const std::string& bytes) {
    int fd = open(path_.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, bytes.data(), bytes.size(), off_t(offset)), ssize_t(bytes.size()));
    close(fd);
  }

  std::string dir_;
  std::string path_;
};

TEST_F(ShmArenaTest, CreateAttachShareBytesAndCreatorUnlinks) {
  auto arena = ShmArena::Create(path_, 1 << 20, "node-a");
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  EXPECT_EQ((*arena)->capacity(), 1u << 20);
  EXPECT_EQ((*arena)->path(), path_);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*arena)->data()) % 4096, 0u);
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(uint64_t(st.st_size), ShmArena::kHeaderBytes + (1 << 20));

  std::memcpy((*arena)->data() + 1000, "hello", 5);
  {
    auto worker = ShmArena::Attach(path_, "node-a");
    ASSERT_TRUE(worker.ok()) << worker.status().message();
    EXPECT_EQ((*worker)->capacity(), 1u << 20);
    EXPECT_EQ(std::string((*worker)->data() + 1000, 5), "hello");
    std::memcpy((*worker)->data() + (1 << 20) - 3, "end", 3);  // the last bytes
  }
  EXPECT_TRUE(std::filesystem::exists(path_)) << "an attached arena does not unlink";
  EXPECT_EQ(std::string((*arena)->data() + (1 << 20) - 3, 3), "end");
  arena->reset();
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(ShmArenaTest, CreateRefusesAnExistingPathAndBadArguments) {
  { std::ofstream(path_) << "someone else's"; }
  auto again = ShmArena::Create(path_, 4096, "t");
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.status().message(), HasSubstr(path_));
  EXPECT_THAT(again.status().message(), HasSubstr(std::strerror(EEXIST)));
  EXPECT_TRUE(std::filesystem::exists(path_)) << "a failed Create leaves others' files alone";

  std::string other = dir_ + "/other";
  EXPECT_EQ(ShmArena::Create(other, 0, "t").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ShmArena::Create(other, 4096, std::string(65, 'x')).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ShmArena::Create(other, 4096, std::string("a\0b", 3)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(ShmArena::Create(other, 4096, std::string(64, 'x')).ok()) << "64 bytes fit";
  auto no_dir = ShmArena::Create(dir_ + "/missing/arena", 4096, "t");
  ASSERT_FALSE(no_dir.ok());
  EXPECT_THAT(no_dir.status().message(), HasSubstr(dir_ + "/missing/arena"));
}

TEST_F(ShmArenaTest, AttachChecksTheTag) {
  std::string tag64(64, 'n');
  auto arena = ShmArena::Create(path_, 8192, tag64);
  ASSERT_TRUE(arena.ok());
  EXPECT_TRUE(ShmArena::Attach(path_, tag64).ok());
  for (std::string wrong :
       {std::string("node-b"), std::string(63, 'n'), tag64 + "n", std::string()}) {
    auto a = ShmArena::Attach(path_, wrong);
    ASSERT_FALSE(a.ok()) << wrong;
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(a.status().message(), HasSubstr("tag"));
  }
}

TEST_F(ShmArenaTest, AttachRejectsWrongMagicAndVersion) {
  auto arena = ShmArena::Create(path_, 8192, "t");
  ASSERT_TRUE(arena.ok());
  Poke(0, "ORRYSHM2");
  auto a = ShmArena::Attach(path_, "t");
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr("magic"));
  Poke(0, "ORRYSHM1");
  ASSERT_TRUE(ShmArena::Attach(path_, "t").ok());
  Poke(8, std::string("\x07\0\0\0", 4));
  a = ShmArena::Attach(path_, "t");
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr("version"));
}

TEST_F(ShmArenaTest, AttachRejectsTruncatedOrResizedFiles) {
  auto arena = ShmArena::Create(path_, 8192, "t");
  ASSERT_TRUE(arena.ok());
  ASSERT_EQ(truncate(path_.c_str(), 4096 + 4096), 0);
  auto a = ShmArena::Attach(path_, "t");
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr("does not match capacity"));
  ASSERT_EQ(truncate(path_.c_str(), 4096 + 8192 + 1), 0);
  EXPECT_EQ(ShmArena::Attach(path_, "t").status().code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(truncate(path_.c_str(), 100), 0);
  a = ShmArena::Attach(path_, "t");
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr("truncated"));
  ASSERT_EQ(truncate(path_.c_str(), 0), 0);
  EXPECT_EQ(ShmArena::Attach(path_, "t").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ShmArenaTest, AttachRejectsHostileCapacities) {
  auto arena = ShmArena::Create(path_, 8192, "t");
  ASSERT_TRUE(arena.ok());
  uint64_t huge = std::numeric_limits<uint64_t>::max();
  Poke(16, std::string(reinterpret_cast<const char*>(&huge), 8));
  EXPECT_EQ(ShmArena::Attach(path_, "t").status().code(), StatusCode::kInvalidArgument);
  uint64_t zero = 0;
  Poke(16, std::string(reinterpret_cast<const char*>(&zero), 8));
  ASSERT_EQ(truncate(path_.c_str(), 4096), 0);
  EXPECT_EQ(ShmArena::Attach(path_, "t").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ShmArenaTest, AttachToMissingOrOddPaths) {
  auto missing = ShmArena::Attach(path_, "t");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(path_));
  EXPECT_FALSE(ShmArena::Attach(dir_, "t").ok()) << "a directory";
  auto arena = ShmArena::Create(path_, 8192, "t");
  ASSERT_TRUE(arena.ok());
  std::string link = dir_ + "/link";
  ASSERT_EQ(symlink(path_.c_str(), link.c_str()), 0);
  EXPECT_FALSE(ShmArena::Attach(link, "t").ok()) << "symlinks are not followed";
}

// An arena made by another process, which holds it until End() and then exits without
// removing it, as a node that is killed does.
class ArenaInChild {
 public:
  ArenaInChild(const std::string& path, const std::string& tag) {
    int ready[2], hold[2];
    EXPECT_EQ(pipe(ready), 0);
    EXPECT_EQ(pipe(hold), 0);
    pid_ = fork();
    if (pid_ == 0) {
      close(ready[0]);
      close(hold[1]);
      auto arena = ShmArena::Create(path, 1 << 16, tag);
      char c = arena.ok() ? 1 : 0;
      if (arena.ok()) (*arena).release();  // never destroyed
      (void)!write(ready[1], &c, 1);
      (void)!read(hold[0], &c, 1);  // until End()
      _exit(0);
    }
    close(ready[1]);
    close(hold[0]);
    char c = 0;
    EXPECT_EQ(read(ready[0], &c, 1), 1);
    EXPECT_EQ(c, 1) << "the child could not create " << path;
    close(ready[0]);
    hold_ = hold[1];
  }
  ~ArenaInChild() { End(); }
  void End() {
    if (hold_ < 0) return;
    char c = 0;  // a byte, not the pipe's end: children forked later hold copies of the pipe
    EXPECT_EQ(write(hold_, &c, 1), 1);
    close(hold_);
    hold_ = -1;
    int status = 0;
    EXPECT_EQ(waitpid(pid_, &status, 0), pid_);
  }

 private:
  pid_t pid_ = -1;
  int hold_ = -1;
};

TEST_F(ShmArenaTest, RemoveAbandonedTakesOnlyArenasWhoseCreatorEnded) {
  auto at = [&](const std::string& name) { return dir_ + "/orrery-" + name; };
  auto own = ShmArena::Create(at("a1"), 1 << 16, "a1");  // held by this process
  ASSERT_TRUE(own.ok()) << own.status().message();
  ArenaInChild held(at("b2"), "b2");  // a node that runs
  ArenaInChild killed(at("c3"), "c3");
  ArenaInChild old(at("d4"), "d4");  // a node too old to hold its arena
  ArenaInChild odd(at("Z9"), "Z9");  // no tag a node makes
  ArenaInChild renamed(at("e5"), "f6");
  killed.End();
  old.End();
  odd.End();
  renamed.End();
  {
    int fd = open(at("d4").c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    uint32_t no_flags = 0;
    ASSERT_EQ(pwrite(fd, &no_flags, sizeof(no_flags), 12), ssize_t(sizeof(no_flags)));
    close(fd);
  }
  { std::ofstream(at("77")) << "not an arena"; }

  EXPECT_THAT(ShmArena::RemoveAbandoned(dir_), ElementsAre("c3"));
  EXPECT_FALSE(std::filesystem::exists(at("c3")));
  for (const char* kept : {"a1", "b2", "d4", "Z9", "e5", "77"})
    EXPECT_TRUE(std::filesystem::exists(at(kept))) << kept;

  held.End();  // its node is killed too
  EXPECT_THAT(ShmArena::RemoveAbandoned(dir_), ElementsAre("b2"));
  EXPECT_TRUE(ShmArena::Attach(at("a1"), "a1").ok()) << "the live arena is untouched";
  EXPECT_TRUE(ShmArena::RemoveAbandoned(dir_ + "/missing").empty());
  own->reset();
  EXPECT_FALSE(std::filesystem::exists(at("a1")));
}

}  // namespace
}  // namespace orrery::objects
