// `orrery list objects` and the object store line of `orrery status`, as text and JSON: pure
// functions of what the head and the nodes said (list_objects.cc asks them), so the formatting
// is unit-tested with fabricated replies. What a node sent is untrusted: the text form shows
// its strings with unprintable bytes escaped and cut to a bound, and counts as they are.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/internal/protocol_objects.h"

namespace orrery::cli {

// What one node said when asked for its objects (kListObjects), or why it said nothing.
struct NodeObjects {
  std::string node_id;  // hex, as the head names the node
  std::string address;  // its inbox, as the head knows it
  bool answered = false;
  std::string error;                 // when not answered: why ("did not answer within 5 s")
  proto::ListObjectsReplyMsg reply;  // when answered
};

// "0 B", "512 B", "1.5 KiB", "1.2 GiB".
std::string HumanBytes(uint64_t bytes);
// "1.2 GiB / 7.0 GiB (3 objects, 0 B spilled)"; "no object store" for a capacity of 0.
std::string StoreUsage(const proto::ObjectStoreUsageMsg& usage);
// `s` with bytes outside printable ASCII written as \xNN, cut to `max` characters ("..."
// ending a cut one).
std::string Printable(const std::string& s, size_t max);

// The text of `orrery list objects`: one line per node (its store's usage, or why it did not
// answer, and a note when its list was cut), then the objects, one line each.
std::string FormatObjects(const std::vector<NodeObjects>& nodes);
// Its --json form: {"nodes": [{node_id, address, answered, error, usage, truncated,
// objects: [{object_id, size, owner, spilled, primary, pins}]}]}, the strings as sent (dump
// it with an error handler that replaces invalid UTF-8).
nlohmann::json ObjectsJson(const std::vector<NodeObjects>& nodes);

}  // namespace orrery::cli
