// main() of the libtorch integration tests. Worker processes re-run the test executable, so
// the first thing main() does is let the runtime take over when this process is a worker;
// only the driver goes on to run the tests.
#include <gtest/gtest.h>

#include "orrery/orrery.h"
#include "tests/skip_exit_code.h"

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
