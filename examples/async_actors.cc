// async_actors: an actor whose methods are coroutines (orrery::Async<T>) fans out thousands
// of tasks and co_awaits them on its one call thread, answers other calls while a call is
// suspended, and waits with a timeout (docs/api.md "Async actors").
//
//   ./async_actors
#include <dirent.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "example_main.h"
#include "orrery/orrery.h"

int64_t Square(int64_t x) { return x * x; }

int64_t SlowSquare(int64_t x) {
  struct timespec ts {
    0, 200 * 1000 * 1000
  };
  nanosleep(&ts, nullptr);
  return x * x;
}

int Threads() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

class Aggregator {
 public:
  static Aggregator* Create() { return new Aggregator(); }
  // n tasks in flight at once, gathered without a thread per task.
  orrery::Async<int64_t> SumOfSquares(int n) {
    std::vector<orrery::ObjectRef<int64_t>> refs;
    for (int i = 0; i < n; ++i) refs.push_back(orrery::Task(Square).Remote(int64_t(i)));
    int64_t sum = 0;
    for (const auto& v : co_await refs) sum += *v;
    co_return sum;
  }
  // The first of several slow tasks, or -1 when none is done within timeout_ms.
  orrery::Async<int64_t> FirstWithin(int timeout_ms) {
    std::vector<orrery::ObjectRef<int64_t>> refs;
    for (int i = 1; i <= 3; ++i) refs.push_back(orrery::Task(SlowSquare).Remote(int64_t(i)));
    auto r = co_await orrery::WaitAsync(refs, 1, timeout_ms);
    if (r.ready.empty()) co_return -1;
    std::shared_ptr<int64_t> first = co_await r.ready.front();
    co_return *first;
  }
  orrery::Async<std::string> Hello() { co_return "hello while another call waits"; }
  int Threads() { return ::Threads(); }
};

ORRERY_REMOTE(Square, SlowSquare, Aggregator::Create, &Aggregator::SumOfSquares,
              &Aggregator::FirstWithin, &Aggregator::Hello, &Aggregator::Threads);

namespace {

using orrery_examples::Check;

bool Run() {
  bool ok = true;
  auto agg = orrery::Actor(Aggregator::Create).Remote();
  auto sum = agg.Task(&Aggregator::SumOfSquares).Remote(10000);
  // Answered while SumOfSquares is suspended in its co_await.
  std::string hello = *orrery::Get(agg.Task(&Aggregator::Hello).Remote());
  ok &= Check(!hello.empty(), "a second call ran meanwhile: " + hello);
  int64_t want = 0;
  for (int64_t i = 0; i < 10000; ++i) want += i * i;
  ok &= Check(*orrery::Get(sum) == want,
              "10,000 tasks gathered by one actor: " + std::to_string(*orrery::Get(sum)));
  int threads = *orrery::Get(agg.Task(&Aggregator::Threads).Remote());
  ok &= Check(threads < 20, "the actor's process has " + std::to_string(threads) + " threads");
  ok &= Check(*orrery::Get(agg.Task(&Aggregator::FirstWithin).Remote(10)) == -1,
              "WaitAsync gave up after 10 ms");
  int64_t first = *orrery::Get(agg.Task(&Aggregator::FirstWithin).Remote(60000));
  ok &= Check(first == 1 || first == 4 || first == 9,
              "WaitAsync's first ready of three slow tasks: " + std::to_string(first));
  agg.Kill();
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  orrery::Init(argc, argv);
  return orrery_examples::RunThenShutdown("async_actors", Run);
}
