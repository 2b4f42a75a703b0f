// A driver for tests/e2e/retention_test.sh: joins the cluster at ORRERY_ADDRESS, creates
// the actor "keeper" (kept alive) and the actor "doomed" (killed at once), prints "ready",
// then keeps its job running until the file argv[1] exists, and shuts down.
#include <orrery/orrery.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

namespace {
class Keeper {
 public:
  static Keeper* Create() { return new Keeper(); }
  int Ping() { return 1; }
};
}  // namespace

ORRERY_REMOTE(Keeper::Create, &Keeper::Ping);

int main(int argc, char** argv) {
  // First statement: in a worker process Init() serves calls and never returns.
  orrery::Init();  // the cluster at ORRERY_ADDRESS
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <stop file>\n", argv[0]);
    return 2;
  }
  auto keeper = orrery::Actor(Keeper::Create).SetName("keeper").Remote();
  auto doomed = orrery::Actor(Keeper::Create).SetName("doomed").Remote();
  int up = *orrery::Get(keeper.Task(&Keeper::Ping).Remote(), 60000) +
           *orrery::Get(doomed.Task(&Keeper::Ping).Remote(), 60000);
  doomed.Kill();
  std::printf("ready %d\n", up);
  std::fflush(stdout);
  // The test's own deadline bounds this wait (it creates the file, or kills this driver).
  while (!std::filesystem::exists(argv[1]))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  orrery::Shutdown();
  return 0;
}
