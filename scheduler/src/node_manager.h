// The head's node registry: which nodes exist, where they listen, when each was last heard
// from, their resources (the view the scheduling policies read) and memory, and each node's
// secret (only a node itself may speak for its id). docs/architecture.md "The head".
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "orrery/scheduler/policy.h"
#include "scheduler/src/head_context.h"

namespace orrery::scheduler {

// The cause of death of a node that said goodbye.
inline constexpr const char* kLeftCleanly = "the node left the cluster";

// What a node's heartbeat last said of its memory, and what its stored record says.
struct NodeMemory {
  int64_t used = 0, total = 0;
  double threshold = 0;
  int64_t written_used = -1;  // -1: not written yet
};

// What a node's heartbeat last said of its object store, and what its stored record says.
struct NodeObjectStore {
  proto::ObjectStoreUsageMsg usage;  // clamped: used <= capacity, all within records' bounds
  int64_t written_used = -1;         // -1: not written yet
  uint64_t written_spilled = 0, written_num_objects = 0;
};

// The longest object store path and tag a node may register with.
inline constexpr size_t kMaxObjectStorePathBytes = 4096;
inline constexpr size_t kMaxObjectStoreTagBytes = 256;

struct NodeEntry {
  NodeView view;  // id, liveness, resources: what the policies see
  std::string address;
  double last_seen = 0;
  NodeMemory memory;
  NodeObjectStore objects;
  // The node's arena and the tag that proves it (NodeInfoMsg), as it registered them.
  std::string object_store_path, object_store_tag;
  // Where the node serves its metrics ("host:port", docs/metrics.md); "" when it serves none.
  std::string metrics_address;
  double end_time = 0;     // when it was marked dead, seconds since the epoch; 0 while alive
  bool forgotten = false;  // its record expired: only the slot stays (indices never change)
};

class NodeManager {
 public:
  explicit NodeManager(HeadContext ctx) : ctx_(std::move(ctx)), list_(entries_) {}

  enum class Registration {
    kIgnored,    // not from the node itself, or a goodbye of a node not alive
    kRefused,    // bad registration (answered with a ConfigError)
    kHeartbeat,  // a node already alive
    kJoined,     // a new node, or one back from the dead
    kLeft,       // a clean goodbye: the caller marks the node dead (MarkDead ...)
  };
  // A node's registration, heartbeat or goodbye; answers the node. *index is set to the
  // node's index for every outcome but kIgnored and kRefused.
  Registration OnRegister(const proto::RegisterNodeMsg& m, double now, int* index);
  // Whether a node-scoped message (`what`) for node `node_id` carries that node's secret. A
  // registration (`adopt`) of a node whose secret this head does not know yet (a new node, or
  // one recovered from the store) sets it; anything else for such a node is dropped.
  bool FromNode(const std::string& node_id, const std::string& secret, const char* what,
                bool adopt);

  // The index of the node with this binary id (or hex id), or -1.
  int Index(const std::string& binary_id) const;
  int IndexOfHex(const std::string& hex) const;
  size_t size() const { return entries_.size(); }
  const NodeEntry& at(int i) const { return entries_[size_t(i)]; }
  bool alive(int i) const { return entries_[size_t(i)].view.alive; }
  const std::string& address(int i) const { return entries_[size_t(i)].address; }
  // The hex id of node `i`, or "" for -1 (how records name a node).
  std::string HexId(int i) const;
  // What node `i` has free, to reserve from (Subtract). Giving back goes through Give.
  Resources& available(int i) { return entries_[size_t(i)].view.available; }
  // Gives `r` back to node `i`'s free resources.
  void Give(int i, const Resources& r);
  // Changes whenever a node's free resources grew or a node joined, left or died: until it
  // changes, what a policy found full stays full (ResourceBook's packing cursors).
  uint64_t epoch() const { return epoch_; }
  // The nodes as the scheduling policies see them (indices are this manager's).
  const NodeList& list() const { return list_; }

  // Node `i` is suspected (silent past the suspicion threshold) or heard from again: a
  // suspected node takes no new work (the policies skip it) and says so in ClusterInfo.
  void SetSuspected(int i, bool suspected);
  // Node `i` is dead: no longer a candidate. FreeAll then frees its resources (once what ran
  // there is accounted for) and records it.
  void MarkDead(int i, const std::string& cause);
  void FreeAll(int i);
  proto::ClusterInfoMsg Info(uint64_t request_id) const;
  // Drops what the head keeps of a dead node (by hex id) whose record expired
  // (docs/redis-schema.md "Retention"): its slot stays, empty; false while it is alive.
  bool Forget(const std::string& node_hex);

  // Rebuilds the registry from the "nodes" table; each node gets a full grace period.
  void Restore(const TableRecords& records, double now);

 private:
  class EntryList final : public NodeList {
   public:
    explicit EntryList(const std::vector<NodeEntry>& entries) : entries_(entries) {}
    size_t size() const override { return entries_.size(); }
    const NodeView& operator[](size_t i) const override { return entries_[i].view; }

   private:
    const std::vector<NodeEntry>& entries_;
  };

  // Takes the memory reading of a registration; true when the record should be rewritten.
  bool UpdateMemory(NodeMemory& mem, const proto::NodeInfoMsg& info) const;
  // Takes the object store usage of a registration; true when the record should be
  // rewritten (docs/redis-schema.md "nodes").
  static bool UpdateObjectStore(NodeObjectStore& store, const proto::ObjectStoreUsageMsg& usage);
  // OK when the node's object store path and tag are UTF-8 and within their bounds.
  static Status CheckObjectStore(const proto::NodeInfoMsg& info);
  // The node's metrics address when it looks like host:port (bounded, no odd bytes), else "".
  static std::string MetricsAddressOf(const proto::NodeInfoMsg& info);
  int Add(NodeEntry entry);
  void Persist(int i);

  HeadContext ctx_;
  uint64_t epoch_ = 0;
  std::vector<NodeEntry> entries_;  // dead nodes stay: indices never change
  EntryList list_;
  std::unordered_map<std::string, int> index_;  // binary id -> index in entries_
  // binary id -> SHA-256 (hex) of the node's secret: kept in its record, so a restarted head
  // recognises the node's messages before the node's next heartbeat.
  std::map<std::string, std::string> secrets_;
};

}  // namespace orrery::scheduler
