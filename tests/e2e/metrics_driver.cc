// A driver for tests/e2e/prometheus_test.sh: creates N detached actors (they stay alive after
// this program exits), makes M calls to each and runs M tasks, then prints one JSON line
// {"actors": N, "submitted": S, "calls": C} with what it submitted, and exits 0.
//   ORRERY_ADDRESS=host:port metrics_driver N M
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "orrery/orrery.h"

namespace {
int Square(int x) { return x * x; }

class Gauge {
 public:
  static Gauge* Create() { return new Gauge(); }
  int Add(int by) { return value_ += by; }

 private:
  int value_ = 0;
};
}  // namespace

ORRERY_REMOTE(Square, Gauge::Create, &Gauge::Add);

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s ACTORS CALLS\n", argv[0]);
    return 2;
  }
  int actors = std::atoi(argv[1]), calls = std::atoi(argv[2]);
  orrery::Init();
  int submitted = 0, finished = 0;
  try {
    std::vector<orrery::ActorHandle<Gauge>> handles;
    for (int i = 0; i < actors; ++i) {
      handles.push_back(orrery::Actor(Gauge::Create)
                            .SetLifetime(orrery::ActorLifetime::kDetached)
                            .SetName("metrics_gauge_" + std::to_string(i))
                            .Remote());
    }
    std::vector<orrery::ObjectRef<int>> refs;
    for (auto& h : handles) {
      for (int c = 0; c < calls; ++c, ++submitted) refs.push_back(h.Task(&Gauge::Add).Remote(1));
    }
    for (int c = 0; c < calls; ++c, ++submitted) refs.push_back(orrery::Task(Square).Remote(c));
    for (const auto& v : orrery::Get(refs)) finished += v ? 1 : 0;
  } catch (const orrery::Error& e) {
    std::fprintf(stderr, "metrics_driver: %s: %s\n", e.kind(), e.what());
    orrery::Shutdown();
    return 1;
  }
  orrery::Shutdown();
  std::printf("{\"actors\": %d, \"submitted\": %d, \"calls\": %d}\n", actors, submitted, finished);
  return 0;
}
