// The Prometheus file-based service discovery JSON of `orrery metrics targets`
// (docs/metrics.md "Discovery"), from the records Redis holds (untrusted).
#pragma once

#include <map>
#include <string>

namespace orrery::cli {

// The file_sd JSON for these records (table "head" and table "nodes", id -> JSON, as read
// from Redis): [{"targets": ["host:port"], "labels": {"role": "head"}}, {"targets": [...],
// "labels": {"role": "node", "node_id": ID}}, ...]. A record that does not parse, a dead
// node, or an address that is not host:port is left out. Pretty-printed, ending in a newline.
std::string MetricsTargetsJson(const std::map<std::string, std::string>& head,
                               const std::map<std::string, std::string>& nodes);

// Whether `address` is host:port (port 1..65535, a host of name or address characters).
bool IsTargetAddress(const std::string& address);

// Writes `text` to `path` through a temporary file renamed into place, so that Prometheus,
// which watches the file, never reads half of it. False when it cannot.
bool WriteAtomically(const std::string& path, const std::string& text);

}  // namespace orrery::cli
