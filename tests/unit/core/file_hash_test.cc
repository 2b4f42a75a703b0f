#include "core/internal/file_hash.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace orrery {
namespace {

TEST(FileHashTest, HashesAreSha256InLowercaseHex) {
  // FIPS 180-2 test vector.
  EXPECT_EQ(HashBytes("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(HashBytes(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(FileHashTest, FileHashEqualsTheHashOfItsBytes) {
  std::string path = ::testing::TempDir() + "/file_hash_test." + std::to_string(getpid());
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(200000, 'x') << "tail";
  }
  EXPECT_EQ(HashFile(path), HashBytes(std::string(200000, 'x') + "tail"));
  std::remove(path.c_str());
  EXPECT_EQ(HashFile(path), "");  // unreadable: no name
}

TEST(FileHashTest, OnlyWellFormedHashesAreAccepted) {
  EXPECT_TRUE(IsContentHash(HashBytes("abc")));
  EXPECT_TRUE(IsContentHash(std::string(64, '0')));
  EXPECT_FALSE(IsContentHash(""));
  EXPECT_FALSE(IsContentHash(std::string(63, 'a')));
  EXPECT_FALSE(IsContentHash(std::string(65, 'a')));
  EXPECT_FALSE(IsContentHash(std::string(64, 'A')));  // uppercase: another spelling of a name
  EXPECT_FALSE(IsContentHash(std::string(32, 'a')));  // the old 128-bit names
  EXPECT_FALSE(IsContentHash(std::string(63, 'a') + "g"));
  EXPECT_FALSE(IsContentHash("../../../../bin/sh" + std::string(46, 'a')));
  EXPECT_FALSE(IsContentHash(std::string(63, 'a') + std::string(1, '\0')));
}

}  // namespace
}  // namespace orrery
