// `orrery job submit|status|logs|stop|list` and `orrery logs` (docs/jobs.md, docs/logs.md):
// jobs submitted to run on the cluster, and the output of workers and jobs read back from
// the cluster's Redis.
#pragma once

#include <string>
#include <vector>

#include "cli/src/inspect.h"

namespace CLI {
class App;
}  // namespace CLI

namespace orrery::cli {

struct JobCommands {
  CLI::App* job = nullptr;
  CLI::App* submit = nullptr;
  CLI::App* status = nullptr;
  CLI::App* logs = nullptr;
  CLI::App* stop = nullptr;
  CLI::App* list = nullptr;
  CLI::App* cluster_logs = nullptr;  // `orrery logs`
  InspectFlags flags;
  CredentialFlags credentials;
  // submit
  std::string resources_json;
  std::vector<std::string> labels;
  std::vector<std::string> env;  // K=V
  std::string working_dir;
  bool no_wait = false;
  std::vector<std::string> command;
  // status, logs, stop
  std::string id;
  bool follow = false;
  // `orrery logs` filters
  std::string actor, node, job_filter;
};

void AddJobCommands(CLI::App& app, JobCommands* commands);
// Whether one of these subcommands was given.
bool JobCommandParsed(const JobCommands& commands);
// Runs the parsed subcommand; returns the exit code (a submitted job's own, when waited for).
int RunJobCommand(JobCommands& commands);

}  // namespace orrery::cli
