// The readiness file of the daemons (docs/cli.md "Readiness files"): what is written, what
// a reader accepts, and what WaitForReadyFile says about a file that names another process.
#include "cli/src/ready_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/fakes/temp_dir.h"

namespace orrery::cli {
namespace {

class ReadyFileTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()) << "mkdtemp failed"; }
  std::string Read(const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  orrery::testing::TempDir dir_{"orrery_ready_file_test"};
};

TEST_F(ReadyFileTest, WrittenWithoutSchemeReadBackAndPrivate) {
  std::string path = dir_.path() + "/head.ready";
  ASSERT_TRUE(WriteReadyFile(path, "tcp://127.0.0.1:40123", 40123, {{"node_id", "ab"}}).ok());
  auto info = ParseReadyFile(Read(path));
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->pid, getpid());
  EXPECT_EQ(info->address, "127.0.0.1:40123");
  EXPECT_EQ(info->port, 40123);
  EXPECT_EQ(info->extra.at("node_id"), "ab");
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Renamed into place: no temporary file is left beside it.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path()))
    entries += e.exists() ? 1 : 0;
  EXPECT_EQ(entries, 1);
}

TEST_F(ReadyFileTest, MalformedContentIsRejected) {
  for (const char* text :
       {"", "{", "[]", "null", R"({"pid": 1, "port": 80})", R"({"pid": 1, "address": "h:1"})",
        R"({"pid": "1", "address": "h:1", "port": 1})",
        R"({"pid": 1, "address": "h:1", "port": 0})",
        R"({"pid": 1, "address": "h:1", "port": 70000})",
        R"({"pid": -4, "address": "h:1", "port": 1})", R"({"pid": 1, "address": "", "port": 1})",
        R"({"pid": 1, "address": 5, "port": 1})"}) {
    EXPECT_FALSE(ParseReadyFile(text).ok()) << text;
  }
  EXPECT_TRUE(ParseReadyFile(R"({"pid": 7, "address": "h:1", "port": 1, "x": [1]})").ok());
}

TEST_F(ReadyFileTest, WaitReturnsAFileOfThisProcessAndRefusesAnotherPid) {
  std::string path = dir_.path() + "/node.ready", log = dir_.path() + "/node.log";
  std::ofstream(log) << "first\nsecond\nthe reason\n";
  ASSERT_TRUE(WriteReadyFile(path, "127.0.0.1:9", 9).ok());
  auto info = WaitForReadyFile(path, getpid(), log, "the node", 1000);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->port, 9);
  auto other = WaitForReadyFile(path, getpid() + 1, log, "the node", 1000);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("names pid"), std::string::npos);
  // The error ends with the daemon's log.
  EXPECT_NE(other.status().message().find("  the reason\n"), std::string::npos)
      << other.status().message();
}

TEST_F(ReadyFileTest, LogTailKeepsTheLastLines) {
  std::string log = dir_.path() + "/x.log";
  std::ofstream out(log);
  for (int i = 0; i < 50; ++i) out << "line " << i << "\n";
  out.close();
  EXPECT_EQ(LogTail(log, 2), "  line 48\n  line 49\n");
  EXPECT_EQ(LogTail(dir_.path() + "/missing.log"), "");
}

}  // namespace
}  // namespace orrery::cli
