// Spill files read back as untrusted (objects/internal/spill_file.h): a missing, truncated,
// longer, linked or non-regular file is refused naming why; an intact one reads back whole;
// a write that fails leaves nothing behind.
#include "objects/internal/spill_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/fakes/temp_dir.h"

namespace orrery::objects {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// What a reader of a spill file is told when its bytes are really gone: why, by name.
TEST(SpillFileTest, AReaderOfABrokenSpillFileIsToldWhy) {
  orrery::testing::TempDir tmp("orrery-spill-file-test");
  ASSERT_FALSE(tmp.path().empty()) << "mkdtemp failed";
  std::string dir = tmp.path(), path = dir + "/spilled";
  EXPECT_EQ(ReadSpillFile(path, 10).status().code(), StatusCode::kNotFound);
  EXPECT_THAT(ReadSpillFile(path, 10).status().message(), HasSubstr("missing"));
  std::ofstream(path) << "12345";
  EXPECT_EQ(ReadSpillFile(path, 10).status().code(), StatusCode::kInternal);
  EXPECT_THAT(ReadSpillFile(path, 10).status().message(), HasSubstr("truncated: size 5"));
  EXPECT_THAT(ReadSpillFile(path, 4).status().message(), HasSubstr("size 5, written 4"));
  fs::create_symlink(path, path + ".link");
  EXPECT_EQ(ReadSpillFile(path + ".link", 5).status().code(), StatusCode::kInternal);
  fs::create_directory(path + ".dir");
  EXPECT_THAT(ReadSpillFile(path + ".dir", 5).status().message(), HasSubstr("not a regular"));
  auto ok = ReadSpillFile(path, 5);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(**ok, "12345");
}

TEST(SpillFileTest, AFailedWriteLeavesNothing) {
  orrery::testing::TempDir tmp("orrery-spill-file-test");
  ASSERT_FALSE(tmp.path().empty()) << "mkdtemp failed";
  std::string dir = tmp.path();
  Status s = WriteSpillFile(dir + "/gone/spilled", "abc", 3);  // no such directory
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("cannot create spill file " + dir + "/gone/spilled"));
  ASSERT_TRUE(WriteSpillFile(dir + "/spilled", "abc", 3).ok());
  EXPECT_FALSE(fs::exists(dir + "/spilled.partial"));
  auto back = ReadSpillFile(dir + "/spilled", 3);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(**back, "abc");
}

}  // namespace
}  // namespace orrery::objects
