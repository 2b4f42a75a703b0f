// The session root (core/internal/session_dir.h): $ORRERY_TMPDIR, else /tmp/orrery; the
// embedded cluster's folder, and those that killed drivers left.
#include "core/internal/session_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "core/internal/process_exists.h"
#include "tests/fakes/folder_flags.h"

namespace orrery {
namespace {

// Sets ORRERY_TMPDIR (or unsets it: nullopt) for one test, and puts back what was there.
class TmpdirEnv {
 public:
  explicit TmpdirEnv(const std::optional<std::string>& value) {
    if (const char* old = std::getenv("ORRERY_TMPDIR")) old_ = old;
    if (value) {
      setenv("ORRERY_TMPDIR", value->c_str(), 1);
    } else {
      unsetenv("ORRERY_TMPDIR");
    }
  }
  ~TmpdirEnv() {
    if (old_) {
      setenv("ORRERY_TMPDIR", old_->c_str(), 1);
    } else {
      unsetenv("ORRERY_TMPDIR");
    }
  }

 private:
  std::optional<std::string> old_;
};

TEST(SessionRootTest, DefaultIsTmpOrrery) {
  TmpdirEnv env(std::nullopt);
  EXPECT_EQ(SessionRoot(), "/tmp/orrery");
}

TEST(SessionRootTest, EmptyEnvironmentIsTheDefault) {
  TmpdirEnv env{std::string()};
  EXPECT_EQ(SessionRoot(), "/tmp/orrery");
}

TEST(SessionRootTest, OrreryTmpdirWinsAndIsReadAtEveryCall) {
  TmpdirEnv env(std::string("/var/tmp/a"));
  EXPECT_EQ(SessionRoot(), "/var/tmp/a");
  setenv("ORRERY_TMPDIR", "/var/tmp/b", 1);
  EXPECT_EQ(SessionRoot(), "/var/tmp/b");
}

TEST(SessionRootTest, MakeEmbeddedFolderRemovesThoseOfEndedDriversOnly) {
  namespace fs = std::filesystem;
  std::string root = fs::temp_directory_path() / "orrery-session-test-XXXXXX";
  ASSERT_NE(mkdtemp(root.data()), nullptr);
  TmpdirEnv env(root);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // a pid that no longer runs
  const std::string dead = std::to_string(child), alive = std::to_string(getpid());
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (const std::string& name :
       {"embedded_" + dead + "_aB3xYz", "embedded_" + dead + "_recent",
        "embedded_" + alive + "_aB3xYz", "embedded_" + dead + "_short",
        "embedded_x" + dead + "_aB3xYz", std::string("embedded__aB3xYz")}) {
    fs::create_directories(fs::path(root) / name);
    if (name != "embedded_" + dead + "_recent") fs::last_write_time(fs::path(root) / name, old);
  }

  std::string made = MakeEmbeddedFolder();
  ASSERT_FALSE(made.empty());
  EXPECT_EQ(made.rfind(root + "/embedded_" + alive + "_", 0), 0u) << made;
  struct stat st;
  ASSERT_EQ(stat(made.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_FALSE(fs::exists(fs::path(root) / ("embedded_" + dead + "_aB3xYz")));
  for (const std::string& kept : {"embedded_" + dead + "_recent", "embedded_" + alive + "_aB3xYz",
                                  "embedded_" + dead + "_short", "embedded_x" + dead + "_aB3xYz",
                                  std::string("embedded__aB3xYz")})
    EXPECT_TRUE(fs::exists(fs::path(root) / kept)) << kept;
  fs::remove_all(root);
}

TEST(SessionRootTest, APidInAFoldersNameIsOneToNineDigitsAndNothingElse) {
  EXPECT_EQ(PidFromDigits("12345"), 12345);
  EXPECT_EQ(PidFromDigits("999999999"), 999999999);
  EXPECT_EQ(PidFromDigits("1234567890"), 0);  // ten digits: no pid
  EXPECT_EQ(PidFromDigits(""), 0);
  EXPECT_EQ(PidFromDigits("12a"), 0);
  EXPECT_EQ(PidFromDigits("-1"), 0);
  EXPECT_EQ(PidFromDigits(" 1"), 0);
}

TEST(SessionRootTest, TheRootSpreadsItsSubfoldersWhereTheFileSystemCan) {
  namespace fs = std::filesystem;
  std::string root = fs::temp_directory_path() / "orrery-session-test-XXXXXX";
  ASSERT_NE(mkdtemp(root.data()), nullptr);
  if (!testing::KeepsTopdirFlag(root)) {
    fs::remove_all(root);
    GTEST_SKIP() << fs::temp_directory_path() << " keeps no FS_TOPDIR_FL";
  }

  std::string plain = root + "/plain";
  ASSERT_EQ(mkdir(plain.c_str(), 0700), 0);
  ASSERT_FALSE(testing::HasTopdirFlag(plain));
  SpreadSubfolders(plain);
  EXPECT_TRUE(testing::HasTopdirFlag(plain));
  SpreadSubfolders(plain);  // twice: still set
  EXPECT_TRUE(testing::HasTopdirFlag(plain));
  SpreadSubfolders(root + "/missing");  // nothing to do, and no error

  TmpdirEnv env(root + "/sessions");
  ASSERT_FALSE(MakeEmbeddedFolder().empty());
  EXPECT_TRUE(testing::HasTopdirFlag(root + "/sessions"));
  fs::remove_all(root);
}

}  // namespace
}  // namespace orrery
