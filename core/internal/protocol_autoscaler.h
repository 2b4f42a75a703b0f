// The autoscaler and the head (docs/autoscaler.md): every few seconds `orrery autoscaler`
// tells the head its node groups (so that a demand one of them could hold waits for it
// instead of failing as infeasible), the nodes it wants removed and its own status; the head
// answers with the demands that wait and the nodes as it sees them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/internal/protocol_wire.h"

namespace orrery::proto {

// The shape of the nodes a group adds. A TPU slice group adds `hosts` nodes at a time; the
// first host of a slice also has head_resources.
struct AutoscalerGroupMsg {
  std::string name;
  std::map<std::string, double> resources;
  std::map<std::string, std::string> labels;
  int max_nodes = 0;  // nodes (hosts for a slice group) the group may have
  int hosts = 1;      // hosts per slice; 1 for a group of single nodes
  std::map<std::string, double> head_resources;
  MSGPACK_DEFINE(name, resources, labels, max_nodes, hosts, head_resources);
};

// Autoscaler -> head (kAutoscalerSync), answered kAutoscalerState.
struct AutoscalerSyncMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  std::vector<AutoscalerGroupMsg> groups;
  double valid_for_s = 30;  // the head forgets the groups this long after the last sync
  // Sets of nodes (hex ids) to remove, each all or nothing (a TPU slice's hosts): the head
  // removes a set only when each of its nodes is still idle, and answers which it removed.
  std::vector<std::vector<std::string>> remove;
  std::vector<std::string> remove_reasons;  // one per set, for the node's cause of death
  std::string status_json;                  // the autoscaler's status (the "autoscaler" table)
  MSGPACK_DEFINE(request_id, reply_to, groups, valid_for_s, remove, remove_reasons, status_json);
};

// A demand waiting in the head's queue: an actor or task (one bundle) or a placement group.
struct PendingDemandMsg {
  std::string id;    // hex
  std::string kind;  // "actor", "task", "placement_group"
  std::vector<std::map<std::string, double>> bundles;
  std::map<std::string, std::string> label_selector;
  std::string strategy;    // a placement group's: PACK, SPREAD, STRICT_PACK, STRICT_SPREAD
  std::string same_label;  // a placement group's: its bundles' nodes share this label's value
  double waiting_s = 0;
  MSGPACK_DEFINE(id, kind, bundles, label_selector, strategy, same_label, waiting_s);
};

struct AutoscalerNodeMsg {
  std::string node_id;  // hex
  std::string address;
  std::map<std::string, double> total;
  std::map<std::string, double> available;
  std::map<std::string, std::string> labels;
  double idle_s = 0;  // how long nothing has run or been reserved on it; 0 when busy
  MSGPACK_DEFINE(node_id, address, total, available, labels, idle_s);
};

struct AutoscalerStateMsg {
  uint64_t request_id = 0;
  std::vector<PendingDemandMsg> demands;
  std::vector<AutoscalerNodeMsg> nodes;           // the alive ones
  std::vector<std::vector<std::string>> removed;  // the sets of `remove` the head removed
  MSGPACK_DEFINE(request_id, demands, nodes, removed);
};

inline constexpr size_t kMaxAutoscalerGroups = 256;
inline constexpr size_t kMaxAutoscalerStatusBytes = 256 * 1024;
inline constexpr size_t kMaxPendingDemandsListed = 10000;

}  // namespace orrery::proto
