// TorchTrainer with an Entrypoint (docs/train.md "Framework processes") on the embedded
// default: each worker runs tests/integration/train_entrypoint.py (standard library only)
// as its child. The launcher's environment, reports and checkpoints through orrery_train,
// a rank that exits 3 or is SIGKILLed (named in the error without restarts, restarted from
// the latest checkpoint with them), a silent process, and an empty argv.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "orrery/orrery.h"
#include "orrery/train/train.h"
#include "test_support.h"

namespace fs = std::filesystem;
namespace train = orrery::train;
using ::testing::HasSubstr;

namespace {

class TrainEntrypointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3 here";
    dir_ = (fs::temp_directory_path() /
            ("orrery-entrypoint-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::create_directories(dir_ + "/scratch");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  train::Entrypoint Script(const std::string& mode, int steps) const {
    train::Entrypoint e;
    e.argv = {"python3", ORRERY_ENTRYPOINT_SCRIPT, mode, std::to_string(steps), dir_ + "/scratch"};
    e.env = {{"FROM_ENTRYPOINT", "yes"}};
    e.working_dir = dir_ + "/scratch";
    return e;
  }
  train::RunConfig Run(const std::string& name, int max_failures) const {
    train::RunConfig run;
    run.name = name;
    run.storage_path = dir_ + "/results";
    run.verbose = 0;
    run.failure_config.max_failures = max_failures;
    return run;
  }
  static train::ScalingConfig Cpus(int workers) {
    train::ScalingConfig s;
    s.num_workers = workers;
    return s;
  }
  static std::string ErrorText(const train::Result& r) {
    return r.error ? r.error->what() : "(no error)";
  }
  static std::string Host() {
    char buf[256] = {0};
    gethostname(buf, sizeof(buf) - 1);
    return buf;
  }

  std::string dir_;
};

TEST_F(TrainEntrypointTest, EveryRankRunsTheScriptWithTheLauncherEnvironmentAndReports) {
  train::TorchTrainer trainer(Script("ok", 4), Cpus(3), Run("ok", 0));
  train::Result result = trainer.Fit();
  ASSERT_FALSE(result.error) << ErrorText(result);
  ASSERT_EQ(result.metrics_history.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(result.metrics_history[i].at("step"), double(i + 1));
    EXPECT_EQ(result.metrics_history[i].at("world"), 3);
    if (i > 0) {
      EXPECT_LT(result.metrics_history[i].at("loss"), result.metrics_history[i - 1].at("loss"));
    }
  }
  ASSERT_TRUE(result.checkpoint.has_value());
  std::ifstream step(result.checkpoint->Path() + "/step.txt");
  std::string text;
  step >> text;
  EXPECT_EQ(text, "4");
  EXPECT_EQ(result.num_failures, 0);
}

TEST_F(TrainEntrypointTest, ARankExitingNonZeroFailsTheRunNamingRankHostStatusAndStderr) {
  train::TorchTrainer trainer(Script("exit3", 5), Cpus(3), Run("exit3", 0));
  train::Result result = trainer.Fit();
  ASSERT_TRUE(result.error) << "the run must fail";
  EXPECT_STREQ(result.error->kind(), "TrainingFailedError");
  std::string what = result.error->what();
  EXPECT_THAT(what, HasSubstr("rank 1"));
  EXPECT_THAT(what, HasSubstr("host " + Host()));
  EXPECT_THAT(what, HasSubstr("exited with status 3"));
  EXPECT_THAT(what, HasSubstr("rank 1 gives up at step 3")) << "the last lines of its stderr";
  EXPECT_EQ(result.num_failures, 1);
  EXPECT_THROW(result.ThrowIfError(), orrery::TrainingFailedError);
}

TEST_F(TrainEntrypointTest, WithMaxFailuresTheGroupRestartsFromTheLatestCheckpoint) {
  for (const char* mode : {"exit3", "kill9"}) {
    SCOPED_TRACE(mode);
    train::TorchTrainer trainer(Script(mode, 5), Cpus(3), Run(mode, 1));
    train::Result result = trainer.Fit();
    ASSERT_FALSE(result.error) << ErrorText(result);
    EXPECT_EQ(result.num_failures, 1);
    EXPECT_EQ(result.metrics.at("step"), 5) << "the same final step as a run without failure";
    // Rank 1 reported steps 1 and 2 before it failed; the trainer waits up to 3 s for the
    // others to have reported them too and restarts from step 2's checkpoint (from an
    // earlier one if they were slower than that).
    EXPECT_LE(result.metrics.at("start"), 2) << "the second attempt resumes from a checkpoint";
    EXPECT_EQ(result.metrics_history.back().at("step"), 5);
  }
}

TEST_F(TrainEntrypointTest, ASilentProcessFailsAfterTheTimeout) {
  train::Entrypoint e;
  e.argv = {"sleep", "60"};
  train::TorchConfig torch;
  torch.timeout_s = 2;
  train::TorchTrainer trainer(e, Cpus(2), Run("silent", 0), torch);
  train::Result result = trainer.Fit();
  ASSERT_TRUE(result.error) << "the run must fail";
  EXPECT_THAT(result.error->what(), HasSubstr("silent"));
  EXPECT_THAT(result.error->what(), HasSubstr("sleep"));
}

TEST_F(TrainEntrypointTest, AnEmptyArgvIsAConfigError) {
  train::TorchTrainer trainer(train::Entrypoint{}, Cpus(1), Run("empty", 0));
  EXPECT_THROW(trainer.Fit(), orrery::ConfigError);
}

}  // namespace
