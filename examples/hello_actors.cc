// hello_actors: Orrery's first example. A few tasks, a counter actor, a named actor and an
// error from remote code, all on the embedded cluster that orrery::Init() starts.
//
//   ./hello_actors
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "example_main.h"
#include "orrery/orrery.h"

// A task is a plain function...
int Add(int a, int b) { return a + b; }

int Divide(int a, int b) {
  if (b == 0) throw std::invalid_argument("division by zero");
  return a / b;
}

// ...and an actor is a class with a static factory; its methods run one at a time, in the
// order each caller submitted them, inside the actor's own worker process.
class Counter {
 public:
  explicit Counter(int start) : value_(start) {}
  static Counter* Create(int start) { return new Counter(start); }
  int Inc(int by) {
    value_ += by;
    return value_;
  }
  int Value() const { return value_; }

 private:
  int value_;
};

// Every function, factory and method called remotely is registered by name.
ORRERY_REMOTE(Add, Divide, Counter::Create, &Counter::Inc, &Counter::Value);

namespace {

using orrery_examples::Check;

bool Run() {
  bool ok = true;

  std::printf("tasks:\n");
  orrery::ObjectRef<int> sum = orrery::Task(Add).Remote(1, 2);
  int three = *orrery::Get(sum);
  ok &= Check(three == 3, "Add(1, 2) = " + std::to_string(three));
  std::vector<orrery::ObjectRef<int>> refs;
  for (int i = 0; i < 4; ++i) refs.push_back(orrery::Task(Add).Remote(i, 10));
  std::string values;
  int total = 0;
  for (const auto& v : orrery::Get(refs)) {
    values += std::to_string(*v) + " ";
    total += *v;
  }
  ok &= Check(total == 46, "four tasks in parallel: " + values);
  // A ref can be an argument: the task runs once its input exists.
  int chained = *orrery::Get(orrery::Task(Add).Remote(sum, 100));
  ok &= Check(chained == 103, "Add(ref to 3, 100) = " + std::to_string(chained));

  std::printf("a counter actor:\n");
  orrery::ActorHandle<Counter> counter = orrery::Actor(Counter::Create).Remote(0);
  std::vector<orrery::ObjectRef<int>> incs;
  for (int i = 0; i < 5; ++i) incs.push_back(counter.Task(&Counter::Inc).Remote(1));
  int after = *orrery::Get(incs.back());
  ok &= Check(after == 5, "five Inc(1) calls in order, value " + std::to_string(after));

  counter.Kill();

  std::printf("a named actor:\n");
  orrery::Actor(Counter::Create).SetName("greeter_count").Remote(41);
  std::optional<orrery::ActorHandle<Counter>> named = orrery::GetActor<Counter>("greeter_count");
  ok &= Check(named.has_value(), "GetActor(\"greeter_count\") found it");
  if (named) {
    int v = *orrery::Get(named->Task(&Counter::Inc).Remote(1));
    ok &= Check(v == 42, "Inc through the looked-up handle = " + std::to_string(v));
  }

  std::printf("an error in remote code:\n");
  try {
    orrery::Get(orrery::Task(Divide).Remote(1, 0));
    ok &= Check(false, "Divide(1, 0) should have thrown");
  } catch (const orrery::RemoteError& e) {
    std::printf("  caught orrery::RemoteError: %s: %s (in %s)\n", e.type().c_str(),
                e.message().c_str(), e.function().c_str());
    ok &= Check(e.message() == "division by zero", "the message came back");
  }

  return ok;
}

}  // namespace

int main() {
  // First thing: worker processes run this same executable and never return from Init().
  orrery::Init();
  return orrery_examples::RunThenShutdown("hello_actors", Run);
}
