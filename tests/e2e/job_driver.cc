// A driver for tests/e2e/jobs_test.sh, run by `orrery job submit`:
//   job_driver exit N     an actor prints a line to std::cout (which must reach this
//                         driver's output with its prefix), then exit with code N
//   job_driver sleep S    run a task that finishes and one that fails, print "sleeping",
//                         then sleep S seconds (for `orrery list tasks`, `orrery job stop`)
//   job_driver flood M    print M MiB of numbered lines of 100 bytes to stdout, as fast as
//                         it can, then "the flood's last line", and exit 0 (no cluster)
//   job_driver env        print JOB_ENV_TEST and the working folder (no cluster)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>

#include "orrery/orrery.h"

class Speaker {
 public:
  static Speaker* Create() { return new Speaker(); }
  int Say(const std::string& what) {
    std::cout << "speaker says " << what << std::endl;
    std::cerr << "speaker warns " << what << std::endl;
    return 1;
  }
};

int Twice(int x) {
  if (x < 0) throw std::invalid_argument("negative");
  return 2 * x;
}

ORRERY_REMOTE(Speaker::Create, &Speaker::Say, Twice);

namespace {
// Whether what this process wrote to stdout (a regular file) contains `text`.
bool OutputHolds(const std::string& text) {
  std::ifstream in("/proc/self/fd/1");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all.find(text) != std::string::npos;
}
}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "exit";
  int arg = argc > 2 ? std::atoi(argv[2]) : 0;
  if (mode == "flood") {
    std::string x(85, 'x');
    for (long i = 0, n = long(arg) * (1 << 20) / 100; i < n; ++i)
      std::printf("line %08ld %s\n", i, x.c_str());
    std::printf("the flood's last line\n");
    return 0;
  }
  if (mode == "env") {  // what --env and --working-dir gave this driver
    const char* v = std::getenv("JOB_ENV_TEST");
    char cwd[4096];
    std::printf("env JOB_ENV_TEST=%s cwd=%s\n", v ? v : "(unset)",
                getcwd(cwd, sizeof(cwd)) ? cwd : "?");
    // A file of the working_dir, when it holds one: the folder's content came along.
    if (FILE* f = std::fopen("marker.txt", "r")) {
      char line[256] = "";
      if (std::fgets(line, sizeof(line), f)) std::printf("marker=%s", line);
      std::fclose(f);
    }
    return 0;
  }
  orrery::Init();
  if (mode == "sleep") {
    // Something for `orrery list tasks` first: a task that finishes, one that fails.
    orrery::Get(orrery::Task(Twice).Remote(21));
    try {
      orrery::Get(orrery::Task(Twice).Remote(-1));
    } catch (const orrery::Error&) {
    }
    std::printf("sleeping\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(arg));
    return 0;
  }
  auto speaker = orrery::Actor(Speaker::Create).Remote();
  orrery::Get(speaker.Task(&Speaker::Say).Remote(std::string("hello")));
  std::printf("driver called actor %s\n", speaker.ID().Hex().c_str());
  std::fflush(stdout);
  // The actor's line reaches this driver through the head a moment after the call returns:
  // wait (10 s at most) until this driver's own output, a file under `orrery job submit`,
  // holds it.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!OutputHolds("speaker says hello") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  orrery::Shutdown();
  return arg;
}
