// The rows of `orrery list workers|tasks` and of the dashboard's /api/workers and
// /api/tasks (docs/cli.md): what a node or driver answered, as JSON, with every string it
// sent cut to 256 bytes and its control bytes escaped.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/internal/protocol_ops.h"

namespace orrery::listings {

nlohmann::json WorkerRow(const std::string& node_id, const proto::WorkerInfoMsg& w);
nlohmann::json TaskRow(const std::string& job_id, const proto::TaskInfoMsg& t);

}  // namespace orrery::listings
