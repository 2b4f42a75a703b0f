// runtime_env: a task and an actor run with variables and a working folder of their own
// (SetRuntimeEnv, as Ray's runtime_env), and a bad environment is refused at submission.
//
//   ./runtime_env
#include <stdlib.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "example_main.h"
#include "orrery/orrery.h"

// What the worker sees: $GREETING and the first line of ./message.txt.
std::string Greet() {
  const char* greeting = std::getenv("GREETING");
  std::string line = "(no message.txt here)";
  std::ifstream("message.txt") >> line;
  return std::string(greeting ? greeting : "(no GREETING)") + ", " + line;
}

class Greeter {
 public:
  static Greeter* Create() { return new Greeter(); }
  std::string Greet() { return ::Greet(); }
};

ORRERY_REMOTE(Greet, Greeter::Create, &Greeter::Greet);

namespace {

using orrery_examples::Check;

bool Run() {
  bool ok = true;
  char tmpl[] = "/tmp/orrery-example-env-XXXXXX";
  std::string dir = mkdtemp(tmpl) ? tmpl : "";
  if (dir.empty()) return Check(false, "could not make a folder for the example");
  std::ofstream(dir + "/message.txt") << "world\n";

  orrery::RuntimeEnv env{.env_vars = {{"GREETING", "hello"}}, .working_dir = dir};
  std::string by_task = *orrery::Get(orrery::Task(Greet).SetRuntimeEnv(env).Remote());
  ok &= Check(by_task == "hello, world", "a task with a runtime env: " + by_task);
  std::string plain = *orrery::Get(orrery::Task(Greet).Remote());
  ok &= Check(plain == "(no GREETING), (no message.txt here)", "a task without: " + plain);

  env.env_vars["GREETING"] = "hi";
  auto greeter = orrery::Actor(Greeter::Create).SetRuntimeEnv(env).Remote();
  std::string by_actor = *orrery::Get(greeter.Task(&Greeter::Greet).Remote());
  ok &= Check(by_actor == "hi, world", "an actor with a runtime env: " + by_actor);
  greeter.Kill();

  try {
    orrery::Task(Greet).SetRuntimeEnv({.working_dir = dir + "/missing"}).Remote();
    ok &= Check(false, "a missing working_dir was accepted");
  } catch (const orrery::ConfigError& e) {
    ok &= Check(true, std::string("a missing working_dir is refused: ") + e.what());
  }
  std::filesystem::remove_all(dir);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  orrery::Init(argc, argv);
  return orrery_examples::RunThenShutdown("runtime_env", Run);
}
