// folder_pack: a folder packed and unpacked is the same folder; the same folder gives the
// same bytes; a hostile package leaves nothing behind and writes nothing outside its folder.
#include "core/internal/folder_pack.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <tuple>
#include <vector>

#include "core/internal/file_hash.h"
#include "orrery/ids.h"
#include "tests/fakes/folder_package.h"

namespace orrery::folder_pack {
namespace {

namespace fs = std::filesystem;
using ::orrery::testing::FolderPackage;

class FolderPackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("orrery-pack-test-" + UniqueId::Random().Hex());
    fs::create_directories(dir_ / "src");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& bytes, bool executable = false) {
    fs::path p = dir_ / "src" / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    chmod(p.c_str(), executable ? 0755 : 0644);
  }
  static std::string Read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  std::string src() const { return (dir_ / "src").string(); }
  std::string dest() const { return (dir_ / "dest").string(); }
  // Every path under `root`, relative, sorted.
  static std::vector<std::string> Tree(const fs::path& root) {
    std::vector<std::string> out;
    for (auto& e : fs::recursive_directory_iterator(root))
      out.push_back(e.path().lexically_relative(root).string());
    std::sort(out.begin(), out.end());
    return out;
  }
  fs::path dir_;
};

TEST_F(FolderPackTest, AFolderComesBackWithItsFilesFoldersAndExecutableBits) {
  Write("greeting.txt", "hello");
  Write("bin/run.sh", "#!/bin/sh\necho hi\n", true);
  Write("data/deep/er/values.bin", std::string("\0\1\2\3", 4));
  fs::create_directories(dir_ / "src" / "empty");
  auto packed = Pack(src());
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  EXPECT_EQ(packed.value().files, 3u);
  EXPECT_EQ(packed.value().hash, HashBytes(packed.value().bytes));
  ASSERT_TRUE(Unpack(packed.value().bytes, dest()).ok());
  EXPECT_EQ(Tree(dest()), Tree(src()));
  EXPECT_EQ(Read(dir_ / "dest" / "greeting.txt"), "hello");
  EXPECT_EQ(Read(dir_ / "dest" / "data/deep/er/values.bin"), std::string("\0\1\2\3", 4));
  EXPECT_EQ(access((dir_ / "dest" / "bin/run.sh").c_str(), X_OK), 0);
  EXPECT_NE(access((dir_ / "dest" / "greeting.txt").c_str(), X_OK), 0);
}

TEST_F(FolderPackTest, TheSameFolderGivesTheSameBytesAndAChangeShowsInTheFingerprint) {
  Write("a.txt", "one");
  Write("b/c.txt", "two");
  auto first = Pack(src()), again = Pack(src());
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first.value().hash, again.value().hash);
  auto before = Fingerprint(src());
  ASSERT_TRUE(before.ok());
  EXPECT_FALSE(before.value().too_big);
  EXPECT_EQ(Fingerprint(src()).value().digest, before.value().digest);
  Write("b/c.txt", "two, longer");
  EXPECT_NE(Fingerprint(src()).value().digest, before.value().digest);
  EXPECT_NE(Pack(src()).value().hash, first.value().hash);
}

TEST_F(FolderPackTest, LinksAreLeftOut) {
  Write("real.txt", "content");
  fs::create_symlink("/etc/passwd", dir_ / "src" / "outside");
  fs::create_symlink("real.txt", dir_ / "src" / "inside");
  auto packed = Pack(src());
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(packed.value().skipped, 2u);
  ASSERT_TRUE(Unpack(packed.value().bytes, dest()).ok());
  EXPECT_EQ(Tree(dest()), std::vector<std::string>{"real.txt"});
}

TEST_F(FolderPackTest, AMissingFolderIsAClearError) {
  auto packed = Pack((dir_ / "nowhere").string());
  ASSERT_FALSE(packed.ok());
  EXPECT_NE(packed.status().message().find("nowhere"), std::string::npos);
}

TEST_F(FolderPackTest, HostilePackagesAreRefusedAndLeaveNothingBehind) {
  fs::create_directories(dir_ / "victim");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"parent", FolderPackage({{"../victim/x", 1, "pwned"}})},
      {"absolute", FolderPackage({{(dir_ / "victim" / "x").string(), 1, "pwned"}})},
      {"dot", FolderPackage({{"./x", 1, "a"}})},
      {"empty component", FolderPackage({{"a//x", 0, ""}})},
      {"nul", FolderPackage({{std::string("a\0b", 3), 1, "a"}})},
      {"no parent entry", FolderPackage({{"sub/x", 1, "a"}})},
      {"a file as a folder", FolderPackage({{"f", 1, "a"}, {"f/x", 1, "b"}})},
      {"repeated", FolderPackage({{"x", 1, "a"}, {"x", 1, "b"}})},
      {"out of order", FolderPackage({{"y", 1, "a"}, {"x", 1, "b"}})},
      {"unknown kind", FolderPackage({{"x", 7, "a"}})},
      {"not an array", std::string("\xa3"
                                   "abc",
                                   4)},
      {"truncated", FolderPackage({{"x", 1, "0123456789"}}).substr(0, 8)},
      {"wrong entry shape", std::string("\x91\x92\xa1x\x01", 5)},
      {"a container claiming more than the bytes", std::string("\xdd\xff\xff\xff\xff", 5)},
  };
  for (const auto& [name, bytes] : cases) {
    Status s = Unpack(bytes, dest());
    EXPECT_FALSE(s.ok()) << name;
    EXPECT_FALSE(fs::exists(dest())) << name;
    EXPECT_TRUE(fs::is_empty(dir_ / "victim")) << name;
  }
  // Nothing beside the destination either (no temporary folder left).
  EXPECT_EQ(Tree(dir_).size(), Tree(dir_ / "src").size() + 2);  // "src", "victim"
}

TEST_F(FolderPackTest, AFolderNestedPastTheDepthLimitIsTooBigAndSuchAPackageIsRefused) {
  std::string deep;
  for (size_t i = 0; i <= kMaxDepth; ++i) deep += "d/";
  Write(deep + "x.txt", "deep");
  auto scan = Fingerprint(src());
  ASSERT_TRUE(scan.ok());
  EXPECT_TRUE(scan.value().too_big);
  auto packed = Pack(src());
  ASSERT_FALSE(packed.ok());
  EXPECT_NE(packed.status().message().find("too big to ship"), std::string::npos);
  // The same nesting from a peer.
  std::vector<std::tuple<std::string, int, std::string>> entries;
  std::string path;
  for (size_t i = 0; i <= kMaxDepth; ++i) {
    path += (i ? "/" : "") + std::string("d");
    entries.emplace_back(path, 0, "");
  }
  EXPECT_FALSE(Unpack(FolderPackage(entries), dest()).ok());
  EXPECT_FALSE(fs::exists(dest()));
  entries.pop_back();  // at the limit: accepted
  EXPECT_TRUE(Unpack(FolderPackage(entries), dest()).ok());
}

TEST_F(FolderPackTest, AFolderUnpackedMeanwhileIsKept) {
  Write("a.txt", "one");
  auto packed = Pack(src());
  ASSERT_TRUE(packed.ok());
  ASSERT_TRUE(Unpack(packed.value().bytes, dest()).ok());
  EXPECT_TRUE(Unpack(packed.value().bytes, dest()).ok());
  EXPECT_EQ(Read(dir_ / "dest" / "a.txt"), "one");
}

TEST_F(FolderPackTest, FoldersLeftByAKilledUnpackAreRemovedThoseOfRunningOnesKept) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // a pid that no longer runs
  const std::string dead = std::to_string(child), alive = std::to_string(getpid());
  fs::path parent = dir_ / "working_dirs";
  for (const std::string& name :
       std::vector<std::string>{"h.tmp" + dead + "-7", "h.tmp" + alive + "-7", "h",
                                "h.tmp" + dead + "-", "h.tmp-7", "h.tmpx" + dead + "-7"})
    fs::create_directories(parent / name);
  std::ofstream(parent / ("f.tmp" + dead + "-3")) << "a file, not a folder";
  EXPECT_EQ(RemoveAbandoned(parent.string()), 0) << "all were touched within 10 minutes";
  EXPECT_EQ(RemoveAbandoned(parent.string(), 0), 1);
  EXPECT_FALSE(fs::exists(parent / ("h.tmp" + dead + "-7")));
  for (const std::string& name :
       std::vector<std::string>{"h.tmp" + alive + "-7", "h", "h.tmp" + dead + "-", "h.tmp-7",
                                "h.tmpx" + dead + "-7", "f.tmp" + dead + "-3"})
    EXPECT_TRUE(fs::exists(parent / name)) << name;
  EXPECT_EQ(RemoveAbandoned((dir_ / "missing").string(), 0), 0);
}

TEST_F(FolderPackTest, AFolderIsKnownByItsIdentityNotItsPath) {
  std::string id = FolderIdentity(src());
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(FolderIdentity(src() + "/"), id);
  fs::create_directories(dir_ / "other");
  EXPECT_NE(FolderIdentity((dir_ / "other").string()), id);
  fs::rename(dir_ / "src", dir_ / "moved");
  fs::create_directories(dir_ / "src");
  EXPECT_NE(FolderIdentity(src()), id) << "another folder at the same path";
  EXPECT_EQ(FolderIdentity((dir_ / "nowhere").string()), "");
}

}  // namespace
}  // namespace orrery::folder_pack
