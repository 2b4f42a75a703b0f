// `orrery list objects` (docs/cli.md): asks every alive node what its object store holds
// (kListObjects, answered with kListObjectsReply to an inbox of the CLI's own) and prints
// the answers (objects_table.h).
#pragma once

#include <string>
#include <vector>

#include "cli/src/objects_table.h"

namespace orrery::cli {

// How long the CLI waits for the nodes' answers, all together.
inline constexpr int kListObjectsTimeoutMs = 5000;

// Sends kListObjects to each of `nodes` (node_id and address set) from an inbox bound on
// `bind_host`, then waits until every one answered or `timeout_ms` passed. Returns `nodes`
// with each one's answer, or why there is none (a node that did not answer in time, an
// address that is not tcp://). A reply is taken only from a node asked, once, and its list
// is cut to kMaxListedObjects. Uses this process's credentials (set before the call).
std::vector<NodeObjects> QueryObjects(std::vector<NodeObjects> nodes, const std::string& bind_host,
                                      int timeout_ms);

// The command itself, once Init connected the CLI to the head: the alive nodes (Nodes()),
// their answers, printed as text or JSON. Returns the exit code: 0 when the listing ran,
// whether or not every node answered (those that did not are reported).
int ListObjects(bool json);

}  // namespace orrery::cli
