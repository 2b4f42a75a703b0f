// A worker process: hosts one actor, or runs tasks under leases. Calls arrive on the
// process runtime's inbox; calls from one caller to an actor are started in their
// submission order (by sequence number, whatever socket they came through) and run on the
// Executor. Replies go straight back to the caller's inbox from the executing thread.
#pragma once

#include <string>

#include "orrery/config.h"

namespace orrery::runtime {

// Entry point of a worker process (after the zygote's fork). Never returns.
[[noreturn]] void WorkerMain();

// The variable `name` of the process's environment, "" when unset.
std::string WorkerEnv(const char* name);
// Readies this worker process from what its node put in its environment: leaves the
// runtime env's working_dir, reads the configuration (ORRERY_*), sets the log level and
// takes the cluster's credentials. Prints why on stderr and exits with status 2 when any of
// these fails.
Config PrepareWorkerProcess();

}  // namespace orrery::runtime
