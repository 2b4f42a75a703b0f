// orrery::Shutdown's steps: a failing step is logged with its name and reason, nothing
// escapes, and the steps after it still run.
#include "actors/src/shutdown_step.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace orrery::runtime {
namespace {

TEST(ShutdownStepTest, AFailingStepIsLoggedAndTheNextStillRuns) {
  bool next_ran = false;
  ::testing::internal::CaptureStderr();
  ShutdownStep("ending the job", [] { throw std::runtime_error("the head is gone"); });
  ShutdownStep("killing the job's actors", [] { throw 42; });
  ShutdownStep("stopping", [&] { next_ran = true; });
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(next_ran);
  EXPECT_NE(err.find("Shutdown: ending the job failed: the head is gone"), std::string::npos)
      << err;
  EXPECT_NE(err.find("Shutdown: killing the job's actors failed with a non-standard exception"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace orrery::runtime
