// The `orrery` command (docs/cli.md): parses the command line and hands each subcommand to
// the file that implements it: start_cmd.cc (`orrery start`), dashboard_cmd.cc,
// inspect_cmd.cc (`status`, `list`), job_cmd.cc (`job`, `logs`), metrics_cmd.cc (`metrics
// targets`), autoscaler_cmd.cc, daemons.cc (`head`, `node`); session.cc keeps what a host runs.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/src/autoscaler_cmd.h"
#include "cli/src/daemons.h"
#include "cli/src/dashboard_cmd.h"
#include "cli/src/inspect.h"
#include "cli/src/job_cmd.h"
#include "cli/src/metrics_cmd.h"
#include "cli/src/session.h"
#include "cli/src/start_cmd.h"
#include "orrery/errors.h"
#include "orrery/orrery.h"
#include "orrery/version.h"

namespace oc = orrery::cli;

namespace {

// `orrery stop`: stops every session of this host that still runs.
int Stop() {
  auto sessions = oc::LiveSessions();
  for (auto& s : sessions) {
    oc::StopProcesses(s.pids);
    std::cout << "stopped " << s.pids.size() << " process(es) of " << s.dir << "\n";
  }
  if (sessions.empty()) std::cout << "nothing to stop\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  CLI::App app{"orrery: start, inspect and stop Orrery clusters"};
  // "orrery 0.1.0 (protocol version 3)" (docs/cli.md "Versions").
  app.set_version_flag("--version", std::string(orrery::VersionLine()),
                       "print the project and protocol versions and exit");
  app.require_subcommand(1);
  oc::StartFlags start_flags;
  CLI::App* start = oc::AddStartCommand(app, &start_flags);
  oc::DashboardFlags dashboard_flags;
  CLI::App* dashboard = oc::AddDashboardCommand(app, &dashboard_flags);
  CLI::App* stop = app.add_subcommand("stop", "stop what `orrery start` started on this host");
  oc::InspectCommands inspect;
  oc::AddInspectCommands(app, &inspect);
  oc::JobCommands jobs;
  oc::AddJobCommands(app, &jobs);
  oc::MetricsCommand metrics;
  oc::AddMetricsCommand(app, &metrics);
  oc::AutoscalerCommand autoscaler;
  oc::AddAutoscalerCommand(app, &autoscaler);
  // Daemons (started by `orrery start`).
  oc::DaemonCommands daemons;
  oc::AddDaemonCommands(app, &daemons);

  CLI11_PARSE(app, argc, argv);

  try {
    if (*daemons.head) return oc::RunHead(daemons.head_flags);
    if (*dashboard) return oc::RunDashboard(dashboard_flags);
    if (*daemons.node) return oc::RunNodeCommand(daemons);
    if (*start) return oc::RunStart(start_flags);
    if (*stop) return Stop();
    if (*inspect.status || *inspect.list) return oc::RunInspectCommand(inspect);
    if (oc::JobCommandParsed(jobs)) return oc::RunJobCommand(jobs);
    if (*metrics.targets) return oc::RunMetricsCommand(metrics);
    if (*autoscaler.app) return oc::RunAutoscalerCommand(autoscaler);
  } catch (const orrery::Error& e) {
    std::cerr << "orrery: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
