// main() of the unit test binaries: gtest_main, except that a run with skipped tests exits
// 77 so that ctest reports it as skipped (tests/skip_exit_code.h).
#include <gtest/gtest.h>

#include "tests/skip_exit_code.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
