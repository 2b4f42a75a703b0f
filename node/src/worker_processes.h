// How the node starts and kills its worker processes: through the zygotes in a real node
// (ZygotePool), through a fake in unit tests (tests/unit/node/node_harness.h), so the
// node's logic can be tested without forking anything.
//
// Not thread-safe: used on the node's inbox thread only (a zygote dies with the thread that
// made it).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "orrery/status.h"

namespace orrery::node {

// What a spawn request became; delivered on the inbox thread.
struct ZygoteEvents {
  std::function<void(uint64_t request_id, int pid)> spawned;
  std::function<void(int pid, const std::string& how)> exited;
  // The request will never be answered: its zygote died or could not take it.
  std::function<void(uint64_t request_id, const std::string& cause)> failed;
};

class WorkerProcesses {
 public:
  virtual ~WorkerProcesses() = default;
  // A descriptor for the inbox to poll, OnReady() when readable; -1 for none.
  virtual int fd() const = 0;
  virtual void OnReady() = 0;
  // Gets ready to start workers of argv[0] soon (the embedded node's own program).
  [[nodiscard]] virtual Status Prepare(const std::vector<std::string>& argv) = 0;
  // Asks for a worker process running argv with `env` added; the answer comes through the
  // events. An error means the request was not taken.
  [[nodiscard]] virtual Status Spawn(const std::vector<std::string>& argv, uint64_t request_id,
                                     const std::map<std::string, std::string>& env) = 0;
  // Kills the worker process `pid` (SIGKILL); its exit comes through the events.
  virtual void Kill(int pid) = 0;
  // Kills every worker process and waits (briefly) until they have ended.
  virtual void StopAll() = 0;
};

// Makes the node's WorkerProcesses: `env` goes to every worker.
using WorkerProcessesFactory = std::function<std::unique_ptr<WorkerProcesses>(
    std::map<std::string, std::string> env, ZygoteEvents events)>;

}  // namespace orrery::node
