// The dashboard's JSON API (docs/dashboard.md) as pure functions: table contents in
// (the records of docs/redis-schema.md as stored, id -> JSON text), response bodies out.
// No I/O, so every response is unit-testable without Redis.
//
// Records that are not a JSON object are skipped (one bad record never hides the rest).
// Numbers are read as any JSON number (the head writes doubles such as 4.0).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dashboard/src/redis_reader.h"

namespace orrery::dashboard {

using Amounts = std::map<std::string, double>;  // resource name -> amount

// The `redis` member of every response.
struct RedisState {
  std::string address;
  bool ok = false;
  std::string error;  // why not ok; "" when ok
};

// The tables one response reads (only those it needs are filled).
struct Tables {
  Table nodes;
  Table actors;
  Table placement_groups;
  Table jobs;
  Table train_runs;
};

// The parsed records of a table, in id order; bad ones skipped.
std::vector<nlohmann::json> ParseRecords(const Table& table);

// What each node's resources are used by, from the actors and placement groups tables:
// every bundle of a CREATED group counts on the node holding it, and every actor that is
// placed (non-empty node_id, not DEAD) outside a CREATED group counts its resources on
// its node (inside a created group it runs within its bundle).
std::map<std::string, Amounts> UsedByNode(const Table& actors, const Table& placement_groups);

// TPU slices grouped from the nodes' labels (orrery.io/tpu-slice-name, ...), by name;
// hosts ordered by worker id, alive ones first.
nlohmann::json TpuSlices(const std::vector<nlohmann::json>& nodes);

// One metrics stream entry as the API shows it: {iteration, time, metrics, checkpoint};
// null when the entry is malformed (missing or non-numeric iteration, metrics not a JSON
// object), which callers skip.
nlohmann::json MetricsEntry(const StreamEntry& entry);

nlohmann::json RedisJson(const RedisState& redis);

// GET /api/cluster: reads nodes, actors, placement_groups, train_runs. Its object_store is
// the alive nodes' stores added up.
nlohmann::json ClusterResponse(const RedisState& redis, const Tables& tables);
// GET /api/nodes: reads nodes, actors, placement_groups. Each node is its record plus `used`
// (resource name -> amount in use) and `object_store` ({capacity_bytes, used_bytes,
// spilled_bytes, num_objects} from its object_store_* fields, 0 for a missing or bad one).
nlohmann::json NodesResponse(const RedisState& redis, const Tables& tables);
// GET /api/actors, /api/placement_groups, /api/jobs, /api/submissions: `member` is the
// table's name ("actors", "placement_groups", "jobs", "submissions"); records in id order.
nlohmann::json ListResponse(const RedisState& redis, const std::string& member, const Table& table);
// GET /api/runs: newest first (start_time, then id).
nlohmann::json RunsResponse(const RedisState& redis, const Table& train_runs);
// GET /api/runs/<id>: `run_json` is the record's text; `run` is null when it does not
// parse. Malformed metrics entries are skipped.
nlohmann::json RunResponse(const RedisState& redis, const std::string& run_json,
                           const std::vector<StreamEntry>& metrics);
// GET /api/submissions/<id>: the submitted job's record (`submission`, null when it does not
// parse) and its output's newest entries (`logs`: [{time, stream, text}], oldest first).
// GET /api/logs: the workers' newest lines, the same shape plus node, pid, name, job and
// actor per entry.
nlohmann::json LogsResponse(const RedisState& redis, const std::string& record_json,
                            const std::vector<StreamEntry>& entries);
// An error answer (404, 405): {"error": message}.
nlohmann::json ErrorResponse(const std::string& message);

}  // namespace orrery::dashboard
