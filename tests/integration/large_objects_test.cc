// Large values through the node's shared-memory object store (docs/objects.md): arguments and
// results of 1 KiB to 1 GiB between the driver, tasks and actors; zero-copy Buffer views; a
// store too small (ObjectStoreFullError naming the sizes); spilling to disk and restoring,
// also when the spill disk is full too (an object spilled intact still reads back);
// and lifetime: usage back to zero when refs go, no arena or spill file left after Shutdown.
// Each test starts its own embedded cluster (its store's size differs).
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/internal/kept_memory.h"
#include "orrery/orrery.h"
#include "test_support.h"
#include "tests/sanitizers.h"

namespace {

using orrery_test::kGetTimeoutMs;
using orrery_test::WaitFor;
using ::testing::HasSubstr;

using Bytes = std::vector<uint8_t>;

Bytes Pattern(size_t size, uint32_t seed) {
  Bytes b(size);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < size; ++i) {
    x = x * 1664525u + 1013904223u;
    b[i] = uint8_t(x >> 24);
  }
  return b;
}

uint64_t Checksum(const uint8_t* data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; i += 61) h = (h ^ data[i]) * 1099511628211ull;
  return h ^ size;
}
uint64_t ChecksumOf(const Bytes& b) { return Checksum(b.data(), b.size()); }

// Remote functions: sizes and checksums travel small, the bytes large.
uint64_t SumBytes(Bytes b) { return ChecksumOf(b); }
uint64_t SumBuffer(orrery::Buffer b) { return Checksum(b.data(), b.size()); }
Bytes MakeBytes(uint64_t size, uint32_t seed) { return Pattern(size, seed); }
Bytes EchoBytes(Bytes b) { return b; }

class Holder {
 public:
  static Holder* Create() { return new Holder(); }
  uint64_t Keep(Bytes b) {
    kept_ = std::move(b);
    return ChecksumOf(kept_);
  }
  Bytes Give() { return kept_; }
  uint64_t Take(Bytes b) { return b.size(); }
  uint64_t TakeAndFail(Bytes b) { throw std::runtime_error(std::to_string(b.size()) + " refused"); }
  // The bytes of let-go rooms this worker holds for its next large values (kept_memory.h).
  uint64_t Held() { return orrery::internal::ParkedLandingBytes(); }
  // The page faults this worker's process has taken so far.
  int64_t MinorFaults() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
  }

 private:
  Bytes kept_;
};

// A value whose packing fails the second time it is packed in a process: a result's size is
// counted by packing it once, then it is packed into the store.
struct FailsToPack {
  Bytes bytes;
};
int g_packs = 0;

// An actor that keeps running after a call whose result failed to pack.
class Packer {
 public:
  static Packer* Create() { return new Packer(); }
  FailsToPack Make(uint64_t size) { return FailsToPack{Bytes(size, 9)}; }
  uint64_t Take(FailsToPack v) { return v.bytes.size(); }
};

}  // namespace

namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {
  template <>
  struct pack<FailsToPack> {
    template <typename Stream>
    packer<Stream>& operator()(packer<Stream>& o, const FailsToPack& v) const {
      if (++g_packs % 2 == 0) throw std::runtime_error("this value fails to pack");
      return o.pack(v.bytes);
    }
  };
  template <>
  struct convert<FailsToPack> {
    const msgpack::object& operator()(const msgpack::object& o, FailsToPack& v) const {
      o.convert(v.bytes);
      return o;
    }
  };
  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
}  // namespace msgpack

namespace {

ORRERY_REMOTE(SumBytes, SumBuffer, MakeBytes, EchoBytes, Holder::Create, &Holder::Keep,
              &Holder::Give, &Holder::Take, &Holder::TakeAndFail, &Holder::Held,
              &Holder::MinorFaults, Packer::Create, &Packer::Make, &Packer::Take);

std::string TempDir(const char* name) {
  std::string dir = "/tmp/orrery-large-objects-" + std::to_string(getpid()) + "-" + name;
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

// Names in `dir` that start with `prefix` (recursively for directories one level down).
std::vector<std::string> Entries(const std::string& dir, const std::string& prefix = "") {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (name.rfind(prefix, 0) != 0) continue;
    out.push_back(name);
    for (const auto& inner : Entries(dir + "/" + name)) out.push_back(name + "/" + inner);
  }
  closedir(d);
  return out;
}

orrery::Config StoreConfig(long long store_bytes, const std::string& spill_dir) {
  orrery::Config c = orrery_test::TestClusterConfig();
  c.object_store_memory = store_bytes;
  c.object_spill_dir = spill_dir;
  return c;
}

uint64_t StoreUsed() {
  uint64_t used = 0;
  for (const auto& n : orrery::Nodes()) used += n.object_store_used_bytes;
  return used;
}

class LargeObjectsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (orrery::IsInitialized()) orrery::Shutdown();
  }
};

TEST_F(LargeObjectsTest, ArgumentsAndResultsOfEverySizeBetweenDriverTasksAndActors) {
  orrery::Init(StoreConfig(2ll << 30, TempDir("sizes")));
  for (size_t size : {size_t(1) << 10, size_t(1) << 20, size_t(256) << 20}) {
    SCOPED_TRACE("size " + std::to_string(size));
    Bytes value = Pattern(size, 7);
    uint64_t sum = ChecksumOf(value);
    // Driver -> task (inline or by reference), task -> driver.
    EXPECT_EQ(*orrery::Get(orrery::Task(SumBytes).Remote(value), kGetTimeoutMs), sum);
    EXPECT_EQ(*orrery::Get(orrery::Task(SumBuffer).Remote(orrery::Buffer(value)), kGetTimeoutMs),
              Checksum(value.data(), value.size()));
    auto made = orrery::Get(orrery::Task(MakeBytes).Remote(uint64_t(size), 7u), kGetTimeoutMs);
    EXPECT_EQ(ChecksumOf(*made), sum);
    // Put, then the ref to a task and to an actor, and the actor's result back.
    auto ref = orrery::Put(value);
    EXPECT_EQ(*orrery::Get(orrery::Task(SumBytes).Remote(ref), kGetTimeoutMs), sum);
    auto holder = orrery::Actor(Holder::Create).Remote();
    EXPECT_EQ(*orrery::Get(holder.Task(&Holder::Keep).Remote(ref), kGetTimeoutMs), sum);
    EXPECT_EQ(ChecksumOf(*orrery::Get(holder.Task(&Holder::Give).Remote(), kGetTimeoutMs)), sum);
    // A task's large result passed on to another task without coming back to the driver.
    auto echoed =
        orrery::Task(EchoBytes).Remote(orrery::Task(MakeBytes).Remote(uint64_t(size), 7u));
    EXPECT_EQ(*orrery::Get(orrery::Task(SumBytes).Remote(echoed), kGetTimeoutMs), sum);
    holder.Kill();
  }
}

TEST_F(LargeObjectsTest, OneGibibyteArgumentAndResult) {
  orrery::Init(StoreConfig(4ll << 30, TempDir("gib")));
  const size_t size = size_t(1) << 30;
  Bytes value = Pattern(size, 3);
  uint64_t sum = ChecksumOf(value);
  EXPECT_EQ(*orrery::Get(orrery::Task(SumBytes).Remote(value), kGetTimeoutMs), sum);
  value = Bytes();
  auto made = orrery::Get(orrery::Task(MakeBytes).Remote(uint64_t(size), 3u), kGetTimeoutMs);
  EXPECT_EQ(ChecksumOf(*made), sum);
}

TEST_F(LargeObjectsTest, BufferViewsShareTheStoresMemory) {
  orrery::Init(StoreConfig(256ll << 20, TempDir("buffer")));
  Bytes value = Pattern(4 << 20, 11);
  auto ref = orrery::Put(orrery::Buffer(value));
  auto a = orrery::Get(ref, kGetTimeoutMs);
  auto b = orrery::Get(ref, kGetTimeoutMs);
  ASSERT_EQ(a->size(), value.size());
  EXPECT_EQ(a->data(), b->data()) << "two Gets of a stored Buffer read the same memory";
  EXPECT_TRUE(std::equal(value.begin(), value.end(), a->data()));
  // A vector's bytes as a view, without a copy: the same memory again.
  auto vref = orrery::Put(value);
  orrery::Buffer v1 = orrery::GetBuffer(vref, kGetTimeoutMs);
  orrery::Buffer v2 = orrery::GetBuffer(vref, kGetTimeoutMs);
  EXPECT_EQ(v1.data(), v2.data());
  EXPECT_TRUE(std::equal(value.begin(), value.end(), v1.data()));
  // The view outlives the ref.
  vref = orrery::ObjectRef<Bytes>();
  EXPECT_EQ(Checksum(v1.data(), v1.size()), ChecksumOf(value));
}

TEST_F(LargeObjectsTest, PutTooLargeForTheStoreFailsNamingTheSizes) {
  orrery::Init(StoreConfig(32ll << 20, TempDir("full")));
  try {
    orrery::Put(Pattern(64 << 20, 1));
    ADD_FAILURE() << "expected ObjectStoreFullError";
  } catch (const orrery::ObjectStoreFullError& e) {
    EXPECT_THAT(e.what(), HasSubstr("MiB"));
  }
  // Nothing was lost: the store still takes what fits.
  Bytes small = Pattern(8 << 20, 2);
  EXPECT_EQ(ChecksumOf(*orrery::Get(orrery::Put(small), kGetTimeoutMs)), ChecksumOf(small));
}

TEST_F(LargeObjectsTest, SpillsWhenFullRestoresOnGetAndFreesEverything) {
  std::string spill = TempDir("spill");
  orrery::Init(StoreConfig(128ll << 20, spill));
  std::vector<orrery::ObjectRef<Bytes>> refs;
  for (uint32_t i = 0; i < 8; ++i) refs.push_back(orrery::Put(Pattern(32 << 20, i)));
  auto spill_files = [&] {
    size_t n = 0;
    for (const auto& e : Entries(spill)) n += e.find('/') != std::string::npos;
    return n;  // files in the node's own spill directory
  };
  EXPECT_GT(spill_files(), 0u) << "256 MiB through a 128 MiB store spills";
  for (uint32_t i = 0; i < 8; ++i) {
    EXPECT_EQ(ChecksumOf(*orrery::Get(refs[i], kGetTimeoutMs)), ChecksumOf(Pattern(32 << 20, i)))
        << "object " << i;
  }
  refs.clear();
  EXPECT_TRUE(WaitFor([] { return StoreUsed() == 0; })) << "store usage back to zero";
  EXPECT_TRUE(WaitFor([&] { return spill_files() == 0; })) << "no spill file left";
}

// A 64 MiB store spilling to a full 32 MiB file system: the Put that cannot spill fails as
// full ("No space left on device"), and an object spilled earlier, intact on disk, still
// reads back (from its spill file: there is no room to restore it). Needs root to mount.
TEST_F(LargeObjectsTest, ASpilledObjectReadsBackWhenTheSpillDiskIsFull) {
  std::string disk = TempDir("fulldisk");
  if (mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=32m") != 0)
    GTEST_SKIP() << "cannot mount a 32 MiB tmpfs (needs root): " << std::strerror(errno);
  struct Unmount {  // also when an assertion or an exception ends the test early
    std::string dir;
    ~Unmount() {
      if (orrery::IsInitialized()) orrery::Shutdown();
      umount2(dir.c_str(), MNT_DETACH);
      rmdir(dir.c_str());
    }
  } unmount{disk};
  orrery::Init(StoreConfig(64ll << 20, disk));
  {
    auto a = orrery::Put(Pattern(24 << 20, 1));
    auto b = orrery::Put(Pattern(24 << 20, 2));
    auto c = orrery::Put(Pattern(24 << 20, 3));  // spills a: 24 of the disk's 32 MiB
    try {
      orrery::Put(Pattern(24 << 20, 4));  // spilling b does not fit on the disk
      ADD_FAILURE() << "a Put that can neither fit nor spill succeeded";
    } catch (const orrery::ObjectStoreFullError& e) {
      EXPECT_THAT(e.what(), HasSubstr("No space left on device"));
    }
    EXPECT_EQ(ChecksumOf(*orrery::Get(a, kGetTimeoutMs)), ChecksumOf(Pattern(24 << 20, 1)));
    EXPECT_EQ(ChecksumOf(*orrery::Get(b, kGetTimeoutMs)), ChecksumOf(Pattern(24 << 20, 2)));
    EXPECT_EQ(ChecksumOf(*orrery::Get(c, kGetTimeoutMs)), ChecksumOf(Pattern(24 << 20, 3)));
  }
}

TEST_F(LargeObjectsTest, DroppedRefsFreeTheStoreAndShutdownLeavesNoFile) {
  std::string spill = TempDir("lifetime");
  orrery::Init(StoreConfig(256ll << 20, spill));
  std::string node = orrery::Nodes().at(0).node_id.Hex();
  EXPECT_EQ(Entries("/dev/shm", "orrery-" + node).size(), 1u) << "the node's arena";
  {
    std::vector<orrery::ObjectRef<Bytes>> refs;
    for (uint32_t i = 0; i < 10; ++i) refs.push_back(orrery::Put(Pattern(1 << 20, i)));
    auto result = orrery::Task(MakeBytes).Remote(uint64_t(2) << 20, 5u);
    orrery::Get(result, kGetTimeoutMs);
    EXPECT_TRUE(WaitFor([] { return StoreUsed() >= (12ull << 20); }));
  }
  EXPECT_TRUE(WaitFor([] { return StoreUsed() == 0; })) << "every ref dropped: nothing stored";
  orrery::Shutdown();
  EXPECT_TRUE(Entries("/dev/shm", "orrery-" + node).empty()) << "no arena left in /dev/shm";
  EXPECT_TRUE(Entries(spill).empty()) << "no spill directory left";
}

// A result that fails to pack after its room in the store was taken: the call fails and the
// room is freed (it stayed taken, unsealed, for as long as the actor's worker ran).
TEST_F(LargeObjectsTest, AResultThatFailsToPackLeavesNothingInTheStore) {
  orrery::Init(StoreConfig(256ll << 20, TempDir("fails-to-pack")));
  auto packer = orrery::Actor(Packer::Create).Remote();
  EXPECT_ANY_THROW(
      orrery::Get(packer.Task(&Packer::Make).Remote(uint64_t(4) << 20), kGetTimeoutMs));
  {
    // The node's usage as reported after the failed call: with a value put after it.
    auto after = orrery::Put(Bytes(1 << 20, 1));
    ASSERT_TRUE(WaitFor([] { return StoreUsed() >= (1u << 20); }));
  }
  EXPECT_TRUE(WaitFor([] { return StoreUsed() == 0; })) << StoreUsed() << " bytes still stored";
  packer.Kill();
}

// The same for a Put or an argument whose value fails to pack: it throws, and nothing stays in
// the store.
TEST_F(LargeObjectsTest, APutOrArgumentThatFailsToPackLeavesNothingInTheStore) {
  orrery::Init(StoreConfig(256ll << 20, TempDir("put-fails-to-pack")));
  g_packs = 0;
  EXPECT_THROW(orrery::Put(FailsToPack{Bytes(4 << 20, 9)}), std::runtime_error);
  // As an argument: the call is not submitted.
  auto packer = orrery::Actor(Packer::Create).Remote();
  EXPECT_THROW(packer.Task(&Packer::Take).Remote(FailsToPack{Bytes(4 << 20, 9)}),
               std::runtime_error);
  {
    auto after = orrery::Put(Bytes(1 << 20, 1));
    ASSERT_TRUE(WaitFor([] { return StoreUsed() >= (1u << 20); }));
  }
  EXPECT_TRUE(WaitFor([] { return StoreUsed() == 0; })) << StoreUsed() << " bytes still stored";
  packer.Kill();
}

// Why a worker here keeps no freed memory (core/internal/kept_memory.h); "" where it does.
std::string WhyNoMemoryIsKept() {
  if (orrery_test::kSanitized) return "a sanitizer's allocator keeps no freed memory";
  if (const char* keep = std::getenv("ORRERY_KEEP_FREED_MEMORY"); keep && std::string(keep) == "0")
    return "ORRERY_KEEP_FREED_MEMORY=0";
  return "";
}

// A worker keeps the memory its large arguments landed in once their calls are done
// (docs/objects.md "Speed"): after its first calls, the next arguments of that size land
// there, with no new page.
TEST_F(LargeObjectsTest, AWorkerReusesTheMemoryItsLastLargeArgumentsLandedIn) {
  if (std::string why = WhyNoMemoryIsKept(); !why.empty()) GTEST_SKIP() << why;
  orrery::Init(StoreConfig(1ll << 30, TempDir("kept")));
  const size_t size = size_t(256) << 20;
  Bytes value(size, 1);
  auto holder = orrery::Actor(Holder::Create).Remote();
  auto faults = [&holder] {
    return *orrery::Get(holder.Task(&Holder::MinorFaults).Remote(), kGetTimeoutMs);
  };
  // The first two may each take new memory, as the heap grows to hold them.
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(*orrery::Get(holder.Task(&Holder::Take).Remote(value), kGetTimeoutMs), size);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("call " + std::to_string(i + 3));
    int64_t before = faults();
    ASSERT_EQ(*orrery::Get(holder.Task(&Holder::Take).Remote(value), kGetTimeoutMs), size);
    // New memory for 256 MiB faults in 128 huge pages at least (65,536 small ones).
    EXPECT_LT(faults() - before, 64) << "the argument landed in new memory";
  }
  holder.Kill();
}

// A call that fails lets its arguments go as one that returns does: the worker holds their
// rooms for the next large values before it replies. Before, it held none after a failure
// (0 bytes held at the next call), and the room was carved by whatever came next.
TEST_F(LargeObjectsTest, AFailedCallsLargeArgumentsLeaveTheirRoomHeld) {
  if (std::string why = WhyNoMemoryIsKept(); !why.empty()) GTEST_SKIP() << why;
  orrery::Init(StoreConfig(256ll << 20, TempDir("failed-kept")));
  const size_t size = size_t(32) << 20;
  auto holder = orrery::Actor(Holder::Create).Remote();
  EXPECT_THROW(orrery::Get(holder.Task(&Holder::TakeAndFail).Remote(Bytes(size, 1)), kGetTimeoutMs),
               orrery::RemoteError);
  EXPECT_EQ(*orrery::Get(holder.Task(&Holder::Held).Remote(), kGetTimeoutMs), size);
  holder.Kill();
}

}  // namespace
