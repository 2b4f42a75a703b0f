// named_actors: give an actor a name (optionally in a namespace) and find it from anywhere
// in the job, including from inside a task running in another worker process.
//
//   ./named_actors
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "example_main.h"
#include "orrery/orrery.h"

class Registry {
 public:
  static Registry* Create() { return new Registry(); }
  int Register(std::string who) {
    ++count_;
    last_ = who;
    return count_;
  }
  std::string Last() const { return last_; }

 private:
  int count_ = 0;
  std::string last_;
};

// A task that knows the actor only by its name.
int SignIn(std::string who) {
  std::optional<orrery::ActorHandle<Registry>> registry = orrery::GetActor<Registry>("registry");
  if (!registry) return -1;
  return *orrery::Get(registry->Task(&Registry::Register).Remote(who));
}

ORRERY_REMOTE(Registry::Create, &Registry::Register, &Registry::Last, SignIn);

namespace {

using orrery_examples::Check;

bool Run() {
  bool ok = true;
  std::printf("create an actor named \"registry\":\n");
  auto registry = orrery::Actor(Registry::Create).SetName("registry").Remote();
  ok &= Check(*orrery::Get(registry.Task(&Registry::Register).Remote(std::string("driver"))) == 1,
              "the driver registered itself");

  std::printf("look it up:\n");
  auto found = orrery::GetActor<Registry>("registry");
  ok &= Check(found.has_value() && found->ID() == registry.ID(), "GetActor(\"registry\") finds it");
  ok &= Check(!orrery::GetActor<Registry>("nobody").has_value(), "GetActor(\"nobody\") is empty");

  std::printf("tasks find it by name too:\n");
  int a = *orrery::Get(orrery::Task(SignIn).Remote(std::string("task-a")));
  int b = *orrery::Get(orrery::Task(SignIn).Remote(std::string("task-b")));
  ok &= Check(a == 2 && b == 3,
              "two tasks signed in: " + std::to_string(a) + ", " + std::to_string(b));
  ok &= Check(*orrery::Get(registry.Task(&Registry::Last).Remote()) == "task-b",
              "last one was task-b");

  std::printf("namespaces keep names apart:\n");
  auto staging = orrery::Actor(Registry::Create).SetName("registry", "staging").Remote();
  orrery::Get(staging.Task(&Registry::Register).Remote(std::string("staging-driver")));
  auto in_staging = orrery::GetActor<Registry>("registry", "staging");
  ok &= Check(in_staging.has_value() && in_staging->ID() == staging.ID(),
              "\"registry\" in namespace \"staging\" is a different actor");
  ok &= Check(!orrery::GetActor<Registry>("registry", "production").has_value(),
              "nothing named \"registry\" in \"production\"");

  std::printf("a killed actor gives its name back:\n");
  staging.Kill();
  // Kill is asynchronous: wait (with a deadline) until the name no longer resolves.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (orrery::GetActor<Registry>("registry", "staging").has_value() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ok &= Check(!orrery::GetActor<Registry>("registry", "staging").has_value(),
              "\"registry\" in \"staging\" is gone after Kill");
  registry.Kill();
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  orrery::Init(argc, argv);
  return orrery_examples::RunThenShutdown("named_actors", Run);
}
