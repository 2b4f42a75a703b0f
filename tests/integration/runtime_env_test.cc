// Runtime envs on a real cluster: a task and an actor run with the variables and working
// folder they were given (printed back from inside the worker), workers of different envs
// are not shared, and a bad env is refused at submission with a clear error.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <string>

#include "test_support.h"
#include "tests/fakes/temp_dir.h"

namespace {

// "<$name>|<working folder>|<first line of ./marker.txt, or 'none'>", from inside a worker.
std::string EnvAndFolder(std::string name) {
  const char* v = std::getenv(name.c_str());
  char cwd[PATH_MAX];
  std::string line = "none";
  std::ifstream marker("marker.txt");
  if (marker) std::getline(marker, line);
  return std::string(v ? v : "(unset)") + "|" + (getcwd(cwd, sizeof(cwd)) ? cwd : "?") + "|" + line;
}

class EnvActor {
 public:
  static EnvActor* Create() { return new EnvActor(); }
  std::string Show(std::string name) { return EnvAndFolder(name); }
};

ORRERY_REMOTE(EnvAndFolder, EnvActor::Create, &EnvActor::Show);

using orrery_test::kGetTimeoutMs;

// A folder holding marker.txt, removed at the end.
class TempFolder : public orrery::testing::TempDir {
 public:
  TempFolder() : TempDir("orrery-runtime-env") {
    if (!path().empty()) std::ofstream(path() + "/marker.txt") << "shipped\n";
  }
};

TEST(RuntimeEnvTest, ATaskRunsWithItsVariablesAndFolder) {
  TempFolder dir;
  ASSERT_FALSE(dir.path().empty());
  orrery::RuntimeEnv env{.env_vars = {{"RUNTIME_ENV_TEST_MODEL", "small"}},
                         .working_dir = dir.path()};
  auto seen = *orrery::Get(
      orrery::Task(EnvAndFolder).SetRuntimeEnv(env).Remote(std::string("RUNTIME_ENV_TEST_MODEL")),
      kGetTimeoutMs);
  EXPECT_EQ(seen, "small|" + dir.path() + "|shipped");
  // A task without an env on the same executable: not the worker above.
  auto plain = *orrery::Get(
      orrery::Task(EnvAndFolder).Remote(std::string("RUNTIME_ENV_TEST_MODEL")), kGetTimeoutMs);
  EXPECT_EQ(plain.substr(0, plain.find('|')), "(unset)") << plain;
  EXPECT_EQ(plain.substr(plain.rfind('|') + 1), "none") << plain;
  // Another value: another worker.
  env.env_vars["RUNTIME_ENV_TEST_MODEL"] = "large";
  auto other = *orrery::Get(
      orrery::Task(EnvAndFolder).SetRuntimeEnv(env).Remote(std::string("RUNTIME_ENV_TEST_MODEL")),
      kGetTimeoutMs);
  EXPECT_EQ(other, "large|" + dir.path() + "|shipped");
}

TEST(RuntimeEnvTest, AnActorRunsWithItsVariablesAndFolder) {
  TempFolder dir;
  orrery_test::ActorReaper reaper;
  auto actor = reaper.Add(orrery::Actor(EnvActor::Create)
                              .SetRuntimeEnv({.env_vars = {{"RUNTIME_ENV_TEST_ROLE", "router"}},
                                              .working_dir = dir.path()})
                              .Remote());
  EXPECT_EQ(*orrery::Get(actor.Task(&EnvActor::Show).Remote(std::string("RUNTIME_ENV_TEST_ROLE")),
                         kGetTimeoutMs),
            "router|" + dir.path() + "|shipped");
}

TEST(RuntimeEnvTest, ABadEnvIsRefusedAtSubmission) {
  auto refused = [](const orrery::RuntimeEnv& env, const std::string& why) {
    try {
      orrery::Task(EnvAndFolder).SetRuntimeEnv(env).Remote(std::string("X"));
      ADD_FAILURE() << "a task with a bad env (" << why << ") was submitted";
    } catch (const orrery::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
    try {
      orrery::Actor(EnvActor::Create).SetRuntimeEnv(env).Remote();
      ADD_FAILURE() << "an actor with a bad env (" << why << ") was submitted";
    } catch (const orrery::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused({.env_vars = {{"A=B", "1"}}}, "'='");
  refused({.env_vars = {{"ORRERY_HEAD_ADDRESS", "tcp://elsewhere"}}}, "ORRERY_");
  refused({.working_dir = "/nonexistent-orrery-folder"}, "/nonexistent-orrery-folder");
}

}  // namespace
