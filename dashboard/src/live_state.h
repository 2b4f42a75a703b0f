// GET /api/workers and /api/tasks (docs/dashboard.md): what `orrery list workers|tasks`
// shows, asked of the cluster's processes themselves, since no table in Redis holds it:
// every alive node of the nodes table (kListWorkers) and every running job's driver of the
// jobs table (kListTasks), each given kAskTimeoutMs, at most kMaxAsked of them. The
// dashboard presents the cluster's credentials (set when it starts) to them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "dashboard/src/api.h"
#include "dashboard/src/redis_reader.h"

namespace orrery::dashboard {

inline constexpr int kAskTimeoutMs = 2000;
inline constexpr size_t kMaxAsked = 64;

// The `state`, `node` and `job` query parameters filter (an id or its first characters).
struct LiveFilter {
  std::string state, node, job;
};

// {redis, workers: [row], errors: ["node ...: why"]}; rows as `orrery list workers --json`.
nlohmann::json WorkersResponse(RedisReader* reader, const std::string& redis_address,
                               const LiveFilter& filter);
// {redis, tasks: [row], errors: [...]}; rows as `orrery list tasks --json`.
nlohmann::json TasksResponse(RedisReader* reader, const std::string& redis_address,
                             const LiveFilter& filter);

}  // namespace orrery::dashboard
