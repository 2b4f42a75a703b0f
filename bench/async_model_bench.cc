// orrery_async_model_bench: what a suspended call costs when an async actor keeps thousands
// in flight on one thread, for the two ways to suspend one (docs/design-decisions.md "Async
// actors are stackless coroutines"):
//   coroutine: a C++20 coroutine frame, as orrery::Async<T> (resumed from a queue, as the
//              actor's call loop does);
//   fiber:     a Boost.Fiber with its own stack, blocked on a fiber promise (built only when
//              Boost.Fiber is installed: -DORRERY_FIBER_BENCH=ON; Orrery itself has no Boost).
// For each: the resident memory per suspended call (RSS growth over N suspended calls,
// divided by N) and suspensions+resumptions per second (N calls suspended, then all resumed,
// repeated). One JSON line per model.
//
//   orrery_async_model_bench [N=10000] [rounds=20]
#include <chrono>
#include <coroutine>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#ifdef ORRERY_FIBER_BENCH
#include <boost/fiber/all.hpp>
#endif

namespace {

long RssKiB() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      long kib = 0;
      in >> kib;
      return kib;
    }
    std::getline(in, key);
  }
  return 0;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---- stackless coroutines, as Async<T>: a task type whose frame suspends on an awaiter that
// hands its handle to a ready queue (the call loop), and which a driver resumes.
struct Task {
  struct promise_type {
    int64_t value = 0;
    Task get_return_object() {
      return Task{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_value(int64_t v) { value = v; }
    void unhandled_exception() { std::abort(); }
  };
  std::coroutine_handle<promise_type> h;
};

std::vector<std::coroutine_handle<>> g_parked;

struct Park {  // what a co_await of a ref that is not ready does: remember who to resume
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) { g_parked.push_back(h); }
  int64_t await_resume() const noexcept { return 1; }
};

// A call that waits on `waits` refs in turn, with a little state of its own.
Task Call(int64_t id, int waits) {
  int64_t sum = id;
  for (int i = 0; i < waits; ++i) sum += co_await Park{};
  co_return sum;
}

void Coroutines(int n, int rounds) {
  g_parked.reserve(n);
  long before = RssKiB();
  std::vector<Task> calls;
  calls.reserve(n);
  for (int i = 0; i < n; ++i) calls.push_back(Call(i, rounds));
  long after = RssKiB();
  double start = Now();
  uint64_t switches = 0;
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::coroutine_handle<>> ready;
    ready.swap(g_parked);
    for (auto h : ready) h.resume();
    switches += ready.size();
  }
  double took = Now() - start;
  int64_t check = 0;
  for (auto& c : calls) {
    check += c.h.promise().value;
    c.h.destroy();
  }
  std::printf(
      "{\"model\": \"coroutine\", \"calls\": %d, \"bytes_per_suspended_call\": %.0f, "
      "\"resumes_per_s\": %.0f, \"check\": %lld}\n",
      n, double(after - before) * 1024 / n, switches / took, (long long)check);
}

#ifdef ORRERY_FIBER_BENCH
// ---- fibers: each call is a fiber that blocks on a promise per wait; the main fiber fulfils
// them round by round.
void Fibers(int n, int rounds) {
  std::vector<std::unique_ptr<boost::fibers::promise<int64_t>>> promises(size_t(n) * rounds);
  for (auto& p : promises) p = std::make_unique<boost::fibers::promise<int64_t>>();
  std::vector<int64_t> results(n);
  long before = RssKiB();
  std::vector<boost::fibers::fiber> fibers;
  fibers.reserve(n);
  for (int i = 0; i < n; ++i) {
    fibers.emplace_back([&, i] {
      int64_t sum = i;
      for (int r = 0; r < rounds; ++r) sum += promises[size_t(i) * rounds + r]->get_future().get();
      results[i] = sum;
    });
  }
  boost::this_fiber::yield();  // every fiber runs to its first wait
  long after = RssKiB();
  double start = Now();
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < n; ++i) promises[size_t(i) * rounds + r]->set_value(1);
    boost::this_fiber::yield();
  }
  for (auto& f : fibers) f.join();
  double took = Now() - start;
  int64_t check = 0;
  for (int64_t v : results) check += v;
  std::printf(
      "{\"model\": \"fiber\", \"calls\": %d, \"bytes_per_suspended_call\": %.0f, "
      "\"resumes_per_s\": %.0f, \"check\": %lld}\n",
      n, double(after - before) * 1024 / n, double(n) * rounds / took, (long long)check);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 10000;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 20;
  if (n <= 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: orrery_async_model_bench [calls > 0] [rounds > 0]\n");
    return 2;
  }
  Coroutines(n, rounds);
#ifdef ORRERY_FIBER_BENCH
  Fibers(n, rounds);
#else
  std::printf("{\"model\": \"fiber\", \"skipped\": \"built without -DORRERY_FIBER_BENCH=ON\"}\n");
#endif
  return 0;
}
