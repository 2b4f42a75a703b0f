// `orrery metrics targets [--out F]` (docs/cli.md, docs/metrics.md): the cluster's metrics
// endpoints as Prometheus file-based service discovery JSON, read from Redis (the head's
// record in table "head", each alive node's record in "nodes").
#pragma once

#include <map>
#include <string>

#include "cli/src/inspect.h"

namespace CLI {
class App;
}  // namespace CLI

namespace orrery::cli {

struct MetricsCommand {
  CLI::App* metrics = nullptr;
  CLI::App* targets = nullptr;
  InspectFlags flags;
  std::string out;  // --out: "" prints to stdout
};
void AddMetricsCommand(CLI::App& app, MetricsCommand* command);
int RunMetricsCommand(MetricsCommand& command);

}  // namespace orrery::cli
