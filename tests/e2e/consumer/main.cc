// A user program built against an installed Orrery (find_package(Orrery)). Exercises the
// public API end to end: Init, a remote function, an actor, Put/Get, a named actor,
// Wait, Kill and Shutdown. Prints one line per check; exits non-zero on the first mismatch.
#include <orrery/orrery.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace {

int Add(int a, int b) { return a + b; }

std::string Greet(std::string name) { return "hello, " + name; }

class Counter {
 public:
  explicit Counter(int start) : value_(start) {}
  static Counter* Create(int start) { return new Counter(start); }
  int Inc(int by) { return value_ += by; }
  int Value() const { return value_; }

 private:
  int value_;
};

ORRERY_REMOTE(Add, Greet, Counter::Create, &Counter::Inc, &Counter::Value);

constexpr int kTimeoutMs = 60000;
int failures = 0;

template <typename A, typename B>
void Check(const char* what, const A& got, const B& want) {
  if (got == want) {
    std::cout << "ok   " << what << "\n";
  } else {
    std::cout << "FAIL " << what << ": got " << got << ", want " << want << "\n";
    ++failures;
  }
}

void CheckTrue(const char* what, bool cond) { Check(what, cond, true); }

}  // namespace

int main(int argc, char** argv) {
  // First statement: in a worker process Init() serves calls and never returns.
  orrery::Init(argc, argv);
  CheckTrue("IsInitialized after Init", orrery::IsInitialized());

  // A remote function.
  orrery::ObjectRef<int> sum = orrery::Task(Add).Remote(1, 2);
  Check("Task(Add).Remote(1, 2)", *orrery::Get(sum, kTimeoutMs), 3);
  Check("Task(Greet).Remote(\"orrery\")",
        *orrery::Task(Greet).Remote(std::string("orrery")).Get(kTimeoutMs),
        std::string("hello, orrery"));

  // An actor and its methods (calls on one handle run in submission order).
  orrery::ActorHandle<Counter> counter = orrery::Actor(Counter::Create).Remote(10);
  Check("Counter.Inc(1)", *orrery::Get(counter.Task(&Counter::Inc).Remote(1), kTimeoutMs), 11);
  Check("Counter.Inc(5)", *orrery::Get(counter.Task(&Counter::Inc).Remote(5), kTimeoutMs), 16);
  Check("Counter.Value()", *orrery::Get(counter.Task(&Counter::Value).Remote(), kTimeoutMs), 16);

  // Put/Get, and a Put ref passed as an argument.
  orrery::ObjectRef<int> put = orrery::Put(41);
  Check("Get(Put(41))", *orrery::Get(put, kTimeoutMs), 41);
  Check("Task(Add).Remote(Put(41), 1)", *orrery::Get(orrery::Task(Add).Remote(put, 1), kTimeoutMs),
        42);

  // A named actor, looked up by name; both handles reach the same instance.
  auto named = orrery::Actor(Counter::Create).SetName("e2e_counter").Remote(100);
  Check("named Counter.Inc(1)", *orrery::Get(named.Task(&Counter::Inc).Remote(1), kTimeoutMs), 101);
  std::optional<orrery::ActorHandle<Counter>> found = orrery::GetActor<Counter>("e2e_counter");
  CheckTrue("GetActor(\"e2e_counter\") found", found.has_value());
  if (found) {
    Check("GetActor handle Inc(1)", *orrery::Get(found->Task(&Counter::Inc).Remote(1), kTimeoutMs),
          102);
  }
  CheckTrue("GetActor(\"no_such_actor\") is empty",
            !orrery::GetActor<Counter>("no_such_actor").has_value());

  // Wait for all of a batch.
  std::vector<orrery::ObjectRef<int>> refs;
  for (int i = 0; i < 4; ++i) refs.push_back(orrery::Task(Add).Remote(i, i));
  orrery::WaitResult<int> waited = orrery::Wait(refs, static_cast<int>(refs.size()), kTimeoutMs);
  Check("Wait(4 refs).ready", waited.ready.size(), size_t{4});
  Check("Wait(4 refs).unready", waited.unready.size(), size_t{0});
  int total = 0;
  for (const auto& p : orrery::Get(refs, kTimeoutMs)) total += *p;
  Check("sum of Get(4 refs)", total, 12);

  // Kill: afterwards a call fails with ActorDiedError. The kill takes effect
  // asynchronously (as in Ray), so a call racing it may still be served; retry briefly.
  counter.Kill();
  bool died = false;
  std::string last;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!died && std::chrono::steady_clock::now() < deadline) {
    try {
      orrery::Get(counter.Task(&Counter::Inc).Remote(1), kTimeoutMs);
      last = "the call succeeded";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } catch (const orrery::ActorDiedError&) {
      died = true;
    } catch (const orrery::Error& e) {
      last = std::string(e.kind()) + ": " + e.what();
      break;
    }
  }
  if (!died) std::cout << "     (after Kill: " << last << ")\n";
  CheckTrue("call after Kill throws ActorDiedError", died);

  orrery::Shutdown();
  CheckTrue("!IsInitialized after Shutdown", !orrery::IsInitialized());

  if (failures != 0) {
    std::cout << failures << " check(s) failed\n";
    return EXIT_FAILURE;
  }
  std::cout << "all checks passed\n";
  return EXIT_SUCCESS;
}
