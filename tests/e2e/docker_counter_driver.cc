// A driver for tests/e2e/docker_test.sh: adds K to the detached actor named NAME, creating it
// when no live actor has that name, and prints one line "NAME <value> <actor id>". The actor
// outlives this program, so a later run (after the head restarted) finds the same actor and
// its value where the first run left it.
//   ORRERY_ADDRESS=host:port docker_counter_driver NAME K
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "orrery/orrery.h"

namespace {
class Counter {
 public:
  static Counter* Create() { return new Counter(); }
  int Add(int by) { return value_ += by; }

 private:
  int value_ = 0;
};
}  // namespace

ORRERY_REMOTE(Counter::Create, &Counter::Add);

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s NAME K\n", argv[0]);
    return 2;
  }
  const std::string name = argv[1];
  const int by = std::atoi(argv[2]);
  orrery::Init();
  int status = 0;
  try {
    std::optional<orrery::ActorHandle<Counter>> counter = orrery::GetActor<Counter>(name);
    if (!counter) {
      counter = orrery::Actor(Counter::Create)
                    .SetName(name)
                    .SetLifetime(orrery::ActorLifetime::kDetached)
                    .Remote();
    }
    int value = *orrery::Get(counter->Task(&Counter::Add).Remote(by));
    std::printf("%s %d %s\n", name.c_str(), value, counter->ID().Hex().c_str());
  } catch (const orrery::Error& e) {
    std::fprintf(stderr, "docker_counter_driver: %s: %s\n", e.kind(), e.what());
    status = 1;
  }
  orrery::Shutdown();
  return status;
}
