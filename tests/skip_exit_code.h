// How a gtest binary tells ctest that it skipped something. ctest's SKIP_REGULAR_EXPRESSION
// on gtest's "[  SKIPPED ]" line would also turn a binary in which one test skipped and
// another FAILED into "Skipped" (the expression wins over the exit status), hiding the
// failure. So every gtest main ends with `return orrery_test::ExitCode(RUN_ALL_TESTS());`
// and the registration helpers set SKIP_RETURN_CODE 77: a failure always fails, and a run
// whose tests all passed except some that skipped is reported as skipped (.ci/run lists
// those, with the names of the skipped tests).
#pragma once

#include <gtest/gtest.h>

namespace orrery_test {

inline constexpr int kSkippedExitCode = 77;  // ctest's SKIP_RETURN_CODE (and automake's)

// RUN_ALL_TESTS()'s result as the binary's exit status: kSkippedExitCode when it succeeded
// and at least one test called GTEST_SKIP; otherwise unchanged.
inline int ExitCode(int run_all_tests_result) {
  if (run_all_tests_result == 0 && ::testing::UnitTest::GetInstance()->skipped_test_count() > 0) {
    return kSkippedExitCode;
  }
  return run_all_tests_result;
}

}  // namespace orrery_test
