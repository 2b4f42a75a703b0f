// `orrery list workers` and `orrery list tasks` (docs/cli.md): asks every alive node for its
// worker processes and submitted jobs' drivers (kListWorkers), or every running job's
// driver for the tasks and actor calls it submitted (kListTasks), and prints them, filtered.
#pragma once

#include <map>
#include <string>

namespace orrery::cli {

struct WorkerFilter {
  std::string state;  // STARTING, IDLE, BUSY, STOPPING ("" any)
  std::string node;   // a node id or its start
  std::string job;    // a job id (or submission id) or its start
};

// Once Init connected the CLI to the head (its alive nodes come from Nodes()). Returns the
// exit code: 0 when the listing ran (a node that did not answer is reported).
int ListWorkers(const WorkerFilter& filter, bool json);
// `drivers`: the running jobs' driver addresses by job id (hex), from the jobs table.
int ListTasks(const std::map<std::string, std::string>& drivers, const WorkerFilter& filter,
              bool json);

}  // namespace orrery::cli
