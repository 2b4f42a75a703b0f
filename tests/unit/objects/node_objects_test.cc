// A node's object table (objects/src/node_objects.h): create/seal/open/release/free, pins,
// spilling when full and restoring with identical bytes, the "object store full" message,
// failed spills, reading a spilled object from its file when there is no room to restore it
// (the spill disk full too), hostile spill files, FreeOwnedBy, ReleaseHolder, and that nothing is
// left on disk after the store is destroyed.
#include "objects/src/node_objects.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "objects/internal/spill_file.h"

namespace orrery::objects {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr uint64_t kMiB = 1 << 20;

// Bytes that differ per object and per position, so a mixed-up region shows.
std::string Pattern(const ObjectId& id, uint64_t size) {
  std::string s(size, '\0');
  uint64_t seed = id.Hash();
  for (uint64_t i = 0; i < size; ++i) s[i] = char((seed >> (i % 8 * 8)) + i * 31);
  return s;
}

class NodeObjectsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string base = fs::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string tmpl = base + "/orrery-objects-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ASSERT_NO_FATAL_FAILURE(Start(4 * kMiB));
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }

  void Start(uint64_t capacity) {
    store_.reset();
    NodeObjects::Options o;
    o.arena_path = dir_ + "/arena";
    o.capacity = capacity;
    o.spill_dir = dir_ + "/spill";
    o.tag = "node-1";
    auto s = NodeObjects::Create(o);
    ASSERT_TRUE(s.ok()) << s.status().message();
    store_ = std::move(*s);
  }

  // Creates, fills and seals an object; returns its id.
  ObjectId Put(uint64_t size, const std::string& owner = "owner") {
    ObjectId id = ObjectId::Random();
    auto loc = store_->Create(id, size, owner, "creator");
    EXPECT_TRUE(loc.ok()) << loc.status().message();
    if (!loc.ok()) return id;
    std::string bytes = Pattern(id, size);
    std::copy(bytes.begin(), bytes.end(), store_->arena().data() + loc->offset);
    EXPECT_TRUE(store_->Seal(id, "creator").ok());
    return id;
  }

  // Opens the object, checks its bytes and releases it.
  void ExpectBytes(const ObjectId& id, uint64_t size) {
    auto loc = store_->Open(id, "reader");
    ASSERT_TRUE(loc.ok()) << loc.status().message();
    ASSERT_EQ(loc->size, size);
    EXPECT_TRUE(std::string(store_->arena().data() + loc->offset, size) == Pattern(id, size))
        << "bytes of " << id.Hex() << " differ";
    store_->Release(id, "reader");
  }

  NodeObjectInfo Info(const ObjectId& id) {
    for (const auto& info : store_->List()) {
      if (info.id == id) return info;
    }
    ADD_FAILURE() << "not listed: " << id.Hex();
    return {};
  }

  std::string SpillFile(const ObjectId& id) { return dir_ + "/spill/" + id.Hex(); }
  size_t SpillFiles() { return size_t(std::distance(fs::directory_iterator(dir_ + "/spill"), {})); }

  std::string dir_;
  std::unique_ptr<NodeObjects> store_;
};

TEST_F(NodeObjectsTest, CreateSealOpenReleaseFree) {
  ObjectId id = ObjectId::Random();
  auto loc = store_->Create(id, 1000, "driver", "driver");
  ASSERT_TRUE(loc.ok()) << loc.status().message();
  EXPECT_EQ(loc->size, 1000u);
  EXPECT_FALSE(store_->Contains(id)) << "not readable before Seal";
  EXPECT_EQ(store_->Open(id, "w").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Info(id).pins, 1) << "the creator pins it";
  EXPECT_FALSE(Info(id).sealed);
  std::string bytes = Pattern(id, 1000);
  std::copy(bytes.begin(), bytes.end(), store_->arena().data() + loc->offset);
  ASSERT_TRUE(store_->Seal(id, "driver").ok());
  EXPECT_TRUE(store_->Contains(id));
  EXPECT_EQ(Info(id).pins, 0);

  auto a = store_->Open(id, "w1");
  auto b = store_->Open(id, "w1");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->offset, loc->offset);
  EXPECT_EQ(Info(id).pins, 2);
  EXPECT_EQ(store_->Usage().pinned_bytes, 1000u);
  store_->Release(id, "w1");
  store_->Release(id, "stranger");  // holds no pin: no effect
  EXPECT_EQ(Info(id).pins, 1);
  store_->Release(id, "w1");
  EXPECT_EQ(Info(id).pins, 0);
  store_->Release(id, "w1");  // one too many: no effect
  EXPECT_EQ(store_->Usage().pinned_bytes, 0u);
  EXPECT_EQ(store_->Usage().used_bytes, 1024u);
  EXPECT_TRUE(Info(id).primary);

  store_->Free(id);
  store_->Free(id);  // idempotent
  EXPECT_FALSE(store_->Contains(id));
  auto u = store_->Usage();
  EXPECT_EQ(u.used_bytes, 0u);
  EXPECT_EQ(u.num_objects, 0u);
  EXPECT_EQ(u.capacity, 4 * kMiB);
}

TEST_F(NodeObjectsTest, CreateFailsCleanly) {
  NodeObjects::Options o;
  o.arena_path = dir_ + "/arena";  // taken by the fixture's store
  o.capacity = kMiB;
  o.spill_dir = dir_ + "/spill2";
  auto taken = NodeObjects::Create(o);
  ASSERT_FALSE(taken.ok());
  EXPECT_THAT(taken.status().message(), HasSubstr(o.arena_path));
  o.arena_path = dir_ + "/arena2";
  { std::ofstream(dir_ + "/file") << "x"; }
  o.spill_dir = dir_ + "/file/spill";  // under a regular file
  auto no_dir = NodeObjects::Create(o);
  ASSERT_FALSE(no_dir.ok());
  EXPECT_EQ(no_dir.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(no_dir.status().message(), HasSubstr("cannot create spill directory"));
  EXPECT_FALSE(fs::exists(o.arena_path)) << "the arena of a failed Create is removed";
  o.spill_dir = "";
  EXPECT_EQ(NodeObjects::Create(o).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(NodeObjectsTest, MisuseIsAnErrorNotACrash) {
  ObjectId id = Put(100);
  EXPECT_EQ(store_->Create(id, 10, "o", "h").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Seal(id, "creator").code(), StatusCode::kInvalidArgument) << "twice";
  EXPECT_EQ(store_->Seal(ObjectId::Random(), "h").code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Open(ObjectId::Random(), "h").status().code(), StatusCode::kNotFound);
  ObjectId other = ObjectId::Random();
  ASSERT_TRUE(store_->Create(other, 10, "o", "h").ok());
  EXPECT_EQ(store_->Seal(other, "not-h").code(), StatusCode::kInvalidArgument);
  store_->Abort(id);  // sealed: no-op
  EXPECT_TRUE(store_->Contains(id));
  ExpectBytes(id, 100);
}

TEST_F(NodeObjectsTest, AbortDropsAnUnsealedObject) {
  ObjectId id = ObjectId::Random();
  ASSERT_TRUE(store_->Create(id, 2 * kMiB, "o", "h").ok());
  store_->Abort(id);
  store_->Abort(id);
  EXPECT_TRUE(store_->List().empty());
  EXPECT_EQ(store_->Usage().used_bytes, 0u);
  EXPECT_EQ(store_->Usage().pinned_bytes, 0u);
  EXPECT_TRUE(store_->Create(id, 4 * kMiB, "o", "h").ok()) << "the space came back";
}

TEST_F(NodeObjectsTest, ZeroSizeAndCopiesFromOtherNodes) {
  ObjectId empty = Put(0);
  ExpectBytes(empty, 0);
  ObjectId copy = ObjectId::Random();
  ASSERT_TRUE(store_->Create(copy, 10, "tcp://owner", "node", /*primary=*/false).ok());
  ASSERT_TRUE(store_->Seal(copy, "node").ok());
  EXPECT_FALSE(Info(copy).primary);
  EXPECT_EQ(Info(copy).owner, "tcp://owner");
}

TEST_F(NodeObjectsTest, AWorkerAttachedToTheArenaSeesTheNodesRegions) {
  ObjectId id = ObjectId::Random();
  auto loc = store_->Create(id, 64, "w", "w");
  ASSERT_TRUE(loc.ok());
  auto worker = ShmArena::Attach(dir_ + "/arena", "node-1");
  ASSERT_TRUE(worker.ok()) << worker.status().message();
  std::string bytes = Pattern(id, 64);
  std::copy(bytes.begin(), bytes.end(), (*worker)->data() + loc->offset);
  ASSERT_TRUE(store_->Seal(id, "w").ok());
  ExpectBytes(id, 64);
  EXPECT_EQ(ShmArena::Attach(dir_ + "/arena", "node-2").status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(NodeObjectsTest, SpillsLeastRecentlyOpenedAndRestoresIdenticalBytes) {
  ObjectId a = Put(kMiB), b = Put(kMiB), c = Put(kMiB), d = Put(kMiB);
  ExpectBytes(a, kMiB);  // a is now more recent than b
  EXPECT_EQ(SpillFiles(), 0u);
  ObjectId e = Put(kMiB);
  EXPECT_TRUE(Info(b).spilled) << "b was the least recently opened";
  EXPECT_FALSE(Info(a).spilled);
  EXPECT_TRUE(fs::exists(SpillFile(b)));
  EXPECT_EQ(fs::file_size(SpillFile(b)), kMiB);
  auto u = store_->Usage();
  EXPECT_EQ(u.num_spilled, 1u);
  EXPECT_EQ(u.spilled_bytes, kMiB);
  EXPECT_EQ(u.num_objects, 5u);
  EXPECT_TRUE(store_->Contains(b)) << "a spilled object is still there";

  ExpectBytes(b, kMiB);  // restored; spills the least recent of the others (c)
  EXPECT_FALSE(Info(b).spilled);
  EXPECT_FALSE(fs::exists(SpillFile(b))) << "a restore deletes the file";
  EXPECT_TRUE(Info(c).spilled);
  for (ObjectId id : {a, b, c, d, e}) ExpectBytes(id, kMiB);
  EXPECT_EQ(store_->Usage().num_spilled, 1u);
  EXPECT_EQ(SpillFiles(), 1u);
}

TEST_F(NodeObjectsTest, FreeAndDestructionRemoveSpillFilesAndLeaveNothingBehind) {
  std::vector<ObjectId> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(Put(kMiB));
  EXPECT_EQ(store_->Usage().num_spilled, 4u);
  EXPECT_EQ(SpillFiles(), 4u);
  store_->Free(ids[0]);  // spilled
  EXPECT_FALSE(fs::exists(SpillFile(ids[0])));
  EXPECT_EQ(store_->Usage().num_spilled, 3u);
  EXPECT_EQ(store_->Usage().spilled_bytes, 3 * kMiB);
  EXPECT_EQ(SpillFiles(), 3u);
  store_.reset();
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), {}), 0)
      << "the arena file, spill files and spill dir are gone";
}

TEST_F(NodeObjectsTest, PinnedAndUnsealedObjectsAreNeverSpilled) {
  ObjectId a = Put(kMiB), b = Put(kMiB), c = Put(kMiB);
  for (ObjectId id : {a, b, c}) ASSERT_TRUE(store_->Open(id, "w").ok());
  ObjectId unsealed = ObjectId::Random();
  ASSERT_TRUE(store_->Create(unsealed, kMiB, "o", "creator").ok());
  auto full = store_->Create(ObjectId::Random(), kMiB, "o", "h");
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(full.status().message(),
            "object store full: 1.0 MiB needed, capacity 4.0 MiB, 4.0 MiB in use of which 4.0 "
            "MiB pinned, 0 B spilled");
  EXPECT_EQ(SpillFiles(), 0u);
  store_->Release(b, "w");
  ASSERT_TRUE(store_->Create(ObjectId::Random(), kMiB, "o", "h").ok()) << "b can go now";
  EXPECT_TRUE(Info(b).spilled);
  EXPECT_FALSE(Info(a).spilled || Info(c).spilled || Info(unsealed).spilled);
}

TEST_F(NodeObjectsTest, FullEvenAfterSpillingNamesTheSizesAndSpillsNothing) {
  ObjectId a = Put(kMiB), b = Put(kMiB);
  Put(kMiB / 2);
  ASSERT_TRUE(store_->Open(a, "w").ok());
  ASSERT_TRUE(store_->Open(b, "w").ok());
  auto full = store_->Create(ObjectId::Random(), 3 * kMiB, "o", "h");
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(full.status().message(),
            "object store full: 3.0 MiB needed, capacity 4.0 MiB, 2.5 MiB in use of which 2.0 "
            "MiB pinned, 0 B spilled");
  EXPECT_EQ(SpillFiles(), 0u) << "spilling could not have made room";
  auto huge = store_->Create(ObjectId::Random(), 300 * kMiB, "o", "h");
  EXPECT_THAT(huge.status().message(), HasSubstr("300.0 MiB needed, capacity 4.0 MiB"));
  auto absurd = store_->Create(ObjectId::Random(), ~uint64_t(0), "o", "h");
  EXPECT_EQ(absurd.status().code(), StatusCode::kUnavailable);
}

TEST_F(NodeObjectsTest, AFailedSpillLeavesTheObjectInMemory) {
  ObjectId a = Put(2 * kMiB), b = Put(2 * kMiB);
  fs::remove_all(dir_ + "/spill");  // the disk went away
  auto full = store_->Create(ObjectId::Random(), kMiB, "o", "h");
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(full.status().message(),
              HasSubstr("object store full: 1.0 MiB needed, capacity 4.0 MiB, 4.0 MiB in use"));
  EXPECT_THAT(full.status().message(), HasSubstr("spilling failed: cannot create spill file"));
  EXPECT_THAT(full.status().message(), HasSubstr(SpillFile(a)));
  EXPECT_FALSE(Info(a).spilled);
  ExpectBytes(a, 2 * kMiB);
  ExpectBytes(b, 2 * kMiB);
  EXPECT_EQ(store_->Usage().spilled_bytes, 0u);
}

// Checks that `loc` names a's spill file, whose bytes are a's, and that a stays spilled.
void ExpectReadFromSpillFile(NodeObjects& store, const ObjectId& a, const std::string& file,
                             const Result<ObjectLocation>& loc) {
  ASSERT_TRUE(loc.ok()) << loc.status().message();
  EXPECT_EQ(loc->spill_file, file);
  ASSERT_EQ(loc->size, 2 * kMiB);
  auto bytes = ReadSpillFile(loc->spill_file, loc->size);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  EXPECT_TRUE(**bytes == Pattern(a, 2 * kMiB)) << "the spill file's bytes differ";
  EXPECT_EQ(store.Pins(a), 0) << "read from its file: nothing pinned";
  EXPECT_TRUE(store.Contains(a));
}

TEST_F(NodeObjectsTest, ARestoreThatCannotFitIsReadFromItsSpillFile) {
  ObjectId a = Put(2 * kMiB);
  ObjectId b = Put(2 * kMiB), c = Put(2 * kMiB);  // spills a
  ASSERT_TRUE(Info(a).spilled);
  ASSERT_TRUE(store_->Open(b, "w").ok());
  ASSERT_TRUE(store_->Open(c, "w").ok());
  ExpectReadFromSpillFile(*store_, a, SpillFile(a), store_->Open(a, "w"));
  EXPECT_TRUE(Info(a).spilled);
  store_->ReleaseHolder("w");
  ExpectBytes(a, 2 * kMiB);  // room again: restored into the arena
  EXPECT_FALSE(Info(a).spilled);
}

// No file may grow past `bytes` while it lives (a full disk, for root as for anyone):
// writes past it fail with EFBIG instead of raising SIGXFSZ.
class ScopedFileSizeLimit {
 public:
  explicit ScopedFileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old_);
    old_signal_ = signal(SIGXFSZ, SIG_IGN);
    rlimit limit{bytes, old_.rlim_max};
    ok_ = setrlimit(RLIMIT_FSIZE, &limit) == 0;
  }
  ~ScopedFileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    signal(SIGXFSZ, old_signal_);
  }
  bool ok() const { return ok_; }

 private:
  rlimit old_{};
  sighandler_t old_signal_ = SIG_DFL;
  bool ok_ = false;
};

// The store is full and so is the spill disk: the Create that cannot spill fails as full,
// and an object spilled earlier, intact on disk, still reads back (from its file).
TEST_F(NodeObjectsTest, ASpilledObjectReadsBackWhenTheStoreAndTheSpillDiskAreFull) {
  ObjectId a = Put(2 * kMiB);
  ObjectId b = Put(2 * kMiB);
  Put(2 * kMiB);  // spills a
  ASSERT_TRUE(Info(a).spilled);
  {
    ScopedFileSizeLimit full_disk(4096);
    if (!full_disk.ok()) GTEST_SKIP() << "cannot lower RLIMIT_FSIZE here";
    auto full = store_->Create(ObjectId::Random(), 2 * kMiB, "o", "h");
    ASSERT_FALSE(full.ok());
    EXPECT_EQ(full.status().code(), StatusCode::kUnavailable);
    EXPECT_THAT(full.status().message(), HasSubstr("spilling failed: cannot write spill file"));
    ExpectReadFromSpillFile(*store_, a, SpillFile(a), store_->Open(a, "reader"));
    EXPECT_TRUE(Info(a).spilled);
    EXPECT_FALSE(fs::exists(SpillFile(b) + ".partial")) << "a failed spill leaves nothing";
  }
  store_->Free(b);  // room again: a is restored into the arena
  ExpectBytes(a, 2 * kMiB);
}

TEST_F(NodeObjectsTest, AHostileSpillFileIsRejectedAndTheObjectDropped) {
  for (std::string tamper : {"short", "long", "missing", "symlink"}) {
    ObjectId a = Put(2 * kMiB);
    Put(2 * kMiB);
    Put(2 * kMiB);  // spills a
    ASSERT_TRUE(Info(a).spilled) << tamper;
    std::string path = SpillFile(a);
    if (tamper == "short") fs::resize_file(path, kMiB);
    if (tamper == "long") fs::resize_file(path, 2 * kMiB + 1);
    if (tamper == "missing") fs::remove(path);
    if (tamper == "symlink") {
      std::string target = dir_ + "/elsewhere";
      fs::rename(path, target);
      fs::create_symlink(target, path);
    }
    auto r = store_->Open(a, "w");
    ASSERT_FALSE(r.ok()) << tamper;
    EXPECT_EQ(r.status().code(), StatusCode::kInternal) << tamper;
    EXPECT_THAT(r.status().message(), HasSubstr("lost")) << tamper;
    EXPECT_FALSE(store_->Contains(a)) << tamper;
    EXPECT_FALSE(fs::exists(fs::symlink_status(path))) << tamper;
    fs::remove(dir_ + "/elsewhere");
    auto u = store_->Usage();
    EXPECT_EQ(u.num_spilled, 0u) << tamper;
    EXPECT_EQ(u.spilled_bytes, 0u) << tamper;
    for (const auto& info : store_->List()) store_->Free(info.id);
    EXPECT_EQ(store_->Usage().used_bytes, 0u);
  }
}

TEST_F(NodeObjectsTest, FreeOwnedByDeletesThatOwnersObjectsOnly) {
  ObjectId a1 = Put(kMiB, "a"), a2 = Put(kMiB, "a"), b1 = Put(kMiB, "b"), a3 = Put(kMiB, "a");
  ASSERT_TRUE(store_->Open(a2, "reader").ok());  // pinned objects go too
  ObjectId unsealed = ObjectId::Random();        // and unsealed ones
  ASSERT_TRUE(store_->Create(unsealed, 64, "a", "h").ok());
  ASSERT_TRUE(Info(a1).spilled) << "the least recently used one made room";
  auto freed = store_->FreeOwnedBy("a");
  EXPECT_THAT(freed, UnorderedElementsAre(a1, a2, a3, unsealed));
  EXPECT_FALSE(fs::exists(SpillFile(a1)));
  ASSERT_EQ(store_->List().size(), 1u);
  ExpectBytes(b1, kMiB);
  auto u = store_->Usage();
  EXPECT_EQ(u.pinned_bytes, 0u);
  EXPECT_EQ(u.spilled_bytes, 0u);
  EXPECT_EQ(u.used_bytes, kMiB);
  EXPECT_TRUE(store_->FreeOwnedBy("a").empty());
  EXPECT_TRUE(store_->FreeOwnedBy("nobody").empty());
}

TEST_F(NodeObjectsTest, ReleaseHolderDropsItsPinsAndItsUnsealedObjects) {
  ObjectId a = Put(kMiB), b = Put(kMiB);
  ASSERT_TRUE(store_->Open(a, "w1").ok());
  ASSERT_TRUE(store_->Open(a, "w1").ok());
  ASSERT_TRUE(store_->Open(a, "w2").ok());
  ASSERT_TRUE(store_->Open(b, "w1").ok());
  ObjectId writing = ObjectId::Random();
  ASSERT_TRUE(store_->Create(writing, kMiB, "w1", "w1").ok());
  EXPECT_EQ(store_->Usage().pinned_bytes, 3 * kMiB);
  store_->ReleaseHolder("w1");
  EXPECT_EQ(Info(a).pins, 1) << "w2's pin stays";
  EXPECT_EQ(Info(b).pins, 0);
  EXPECT_EQ(store_->List().size(), 2u) << "w1's unsealed object is aborted";
  EXPECT_EQ(store_->Usage().pinned_bytes, kMiB);
  store_->ReleaseHolder("w1");
  store_->ReleaseHolder("never-seen");
  store_->ReleaseHolder("w2");
  EXPECT_EQ(store_->Usage().pinned_bytes, 0u);
  EXPECT_EQ(Info(a).pins, 0);
}

// Random operations against a model: every open object has its own bytes, the usage counts
// match, and destroying the store leaves nothing behind.
TEST_F(NodeObjectsTest, RandomOperationsKeepBytesAndCounts) {
  ASSERT_NO_FATAL_FAILURE(Start(kMiB));
  std::mt19937_64 rng(11);
  std::map<ObjectId, uint64_t> live;  // sealed objects and their sizes
  std::map<ObjectId, int> pins;       // pins "r" holds
  for (int step = 0; step < 600; ++step) {
    int op = int(rng() % 4);
    if (op == 0 || live.empty()) {
      uint64_t size = rng() % (200 * 1024);
      ObjectId id = ObjectId::Random();
      auto loc = store_->Create(id, size, "o", "creator");
      if (!loc.ok()) {
        ASSERT_EQ(loc.status().code(), StatusCode::kUnavailable);
        continue;
      }
      std::string bytes = Pattern(id, size);
      std::copy(bytes.begin(), bytes.end(), store_->arena().data() + loc->offset);
      ASSERT_TRUE(store_->Seal(id, "creator").ok());
      live[id] = size;
      continue;
    }
    auto it = std::next(live.begin(), long(rng() % live.size()));
    if (op == 1) {
      auto loc = store_->Open(it->first, "r");
      ASSERT_TRUE(loc.ok()) << loc.status().message();
      if (!loc->spill_file.empty()) {  // no room to restore it: read from its file, unpinned
        auto bytes = ReadSpillFile(loc->spill_file, loc->size);
        ASSERT_TRUE(bytes.ok()) << bytes.status().message();
        ASSERT_TRUE(**bytes == Pattern(it->first, it->second));
        continue;
      }
      ASSERT_TRUE(std::string(store_->arena().data() + loc->offset, it->second) ==
                  Pattern(it->first, it->second));
      ++pins[it->first];
    } else if (op == 2 && pins.count(it->first)) {
      store_->Release(it->first, "r");
      if (--pins[it->first] == 0) pins.erase(it->first);
    } else if (op == 3) {
      store_->Free(it->first);
      pins.erase(it->first);
      live.erase(it);
    }
    uint64_t pinned = 0;
    for (auto [id, n] : pins) pinned += live[id];
    auto u = store_->Usage();
    ASSERT_EQ(u.pinned_bytes, pinned);
    ASSERT_EQ(u.num_objects, live.size());
    ASSERT_EQ(u.num_spilled, SpillFiles());
  }
  store_.reset();
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), {}), 0);
}

}  // namespace
}  // namespace orrery::objects
