// A small driver built twice with different ORRERY_TEST_VERSION values: creates an actor on
// the cluster at argv[1] (its own embedded one for "embedded") and prints what the actor's
// code says, "VERSION <n>". Lets ZygoteTest replace an executable at one path by another
// build and see which code runs, and see what a zygote, which runs main() up to Init(),
// prints.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "orrery/orrery.h"

namespace {

class Version {
 public:
  static Version* Create() { return new Version(); }
  int Get() { return ORRERY_TEST_VERSION; }
};

}  // namespace

ORRERY_REMOTE(Version::Create, &Version::Get);

int main(int argc, char** argv) {
  // Before the worker check, so that the zygote prints it too; left in stdio's buffer where
  // stdout is a pipe, as a zygote's fork would find it.
  std::printf("BEFORE INIT\n");
  orrery::RunWorkerIfRequested(argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s HEAD_ADDRESS|embedded\n", argv[0]);
    return 2;
  }
  orrery::Config config;
  if (std::string(argv[1]) == "embedded") {
    unsetenv("ORRERY_ADDRESS");
  } else {
    config.address = argv[1];
  }
  config.log_level = "warn";
  int rc = 0;
  try {
    orrery::Init(config);
    auto v = orrery::Actor(Version::Create).Remote();
    std::printf("VERSION %d\n", *orrery::Get(v.Task(&Version::Get).Remote(), 60000));
    v.Kill();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "version_driver: %s\n", e.what());
    rc = 1;
  }
  std::fflush(stdout);
  if (orrery::IsInitialized()) orrery::Shutdown();
  return rc;
}
