// The session root (core/internal/session_dir.h): $ORRERY_TMPDIR, else /tmp/orrery.
#include "core/internal/session_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <string>

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

}  // namespace
}  // namespace orrery
