// A worker process's set-up from what its node put in its environment (worker.h).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "actors/src/worker.h"
#include "core/internal/log.h"
#include "core/internal/runtime_env.h"
#include "core/internal/security.h"

namespace orrery::runtime {

std::string WorkerEnv(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

Config PrepareWorkerProcess() {
  unsetenv("ORRERY_ROLE");
  unsetenv("ORRERY_ZYGOTE_FD");
  // The working folder of the task's or actor's runtime env (checked by the node).
  if (std::string dir = WorkerEnv(runtime_env::kWorkingDirVar); !dir.empty()) {
    if (chdir(dir.c_str()) != 0) {
      std::fprintf(stderr,
                   "orrery worker: cannot change into the runtime env's working_dir %s: %s\n",
                   dir.c_str(), std::strerror(errno));
      _exit(2);
    }
    unsetenv(runtime_env::kWorkingDirVar);
  }
  Config config;
  try {
    config = ApplyEnvironment(Config{});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "orrery worker: bad configuration: %s\n", e.what());
    _exit(2);
  }
  log::SetLevel(config.log_level.empty() ? "warn" : config.log_level);
  log::SetProcessTag("worker " + std::to_string(getpid()));
  // The node points its workers at the cluster's token (or says ORRERY_INSECURE).
  if (auto used = security::UseCredentials(config.insecure, config.token_file, ""); !used.ok()) {
    std::fprintf(stderr, "orrery worker: %s\n", used.status().message().c_str());
    _exit(2);
  }
  return config;
}

}  // namespace orrery::runtime
