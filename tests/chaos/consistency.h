// Do the head and Redis tell the same story? The head's view comes from the public API
// (orrery::Nodes(), named-actor lookups); Redis's from the hashes the head writes
// (docs/redis-schema.md). Each function returns the differences, empty when they agree.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "orrery/orrery.h"

namespace orrery_chaos {

// Redis's records of one table, parsed: id -> JSON text.
using Records = std::map<std::string, std::string>;

// Every node the head knows is in Redis with the same `alive` and `total`, and the other way
// round.
std::vector<std::string> CompareNodes(const std::vector<orrery::NodeInfo>& head,
                                      const Records& redis);

// For each actor name: the head's answer to a lookup (`lookup(name)`, the actor id in hex or
// "" when no live actor has the name) matches Redis (one record with that name that is not
// DEAD, with that id; none when the head says none).
std::vector<std::string> CompareNamedActors(
    const std::set<std::string>& names,
    const std::function<std::string(const std::string&)>& lookup, const Records& redis);

// Actors that Redis does not have at rest: every record that is not DEAD must be ALIVE with a
// worker pid in `worker_pids` (a live worker process of the cluster), each pid used once.
std::vector<std::string> UnsettledActors(const Records& redis, const std::set<int>& worker_pids);

// The pids of ALIVE actors in Redis.
std::set<int> AliveActorPids(const Records& redis);
// Ids of records that are not DEAD, with their state and class.
std::vector<std::string> NotDead(const Records& redis);

}  // namespace orrery_chaos
