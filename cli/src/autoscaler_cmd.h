// `orrery autoscaler --config F [--address A]` (docs/autoscaler.md, docs/cli.md): runs the
// autoscaler in the foreground until SIGINT or SIGTERM; `--check` only validates the config.
#pragma once

#include <string>

#include "cli/src/daemons.h"

namespace CLI {
class App;
}  // namespace CLI

namespace orrery::cli {

struct AutoscalerCommand {
  CLI::App* app = nullptr;
  std::string config;
  std::string address;
  bool check = false;
  CredentialFlags credentials;
};
void AddAutoscalerCommand(CLI::App& app, AutoscalerCommand* command);
int RunAutoscalerCommand(AutoscalerCommand& command);

}  // namespace orrery::cli
