// The head's placement groups: creation (placed atomically through the scheduling queue),
// waiting, removal, and the resources left in each bundle for the actors and leases placed
// inside it. docs/architecture.md "The head".
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "scheduler/src/head_context.h"
#include "scheduler/src/node_manager.h"
#include "scheduler/src/scheduling_queue.h"

namespace orrery::scheduler {

struct PgEntry {
  struct Waiter {
    uint64_t request_id;
    std::string reply_to;
    double deadline;  // < 0: none
  };
  enum State { kPending, kCreated, kRemoved };

  proto::PlacementGroupMsg spec;
  State state = kPending;
  std::vector<int> node_of_bundle;          // kCreated: a node index per bundle
  std::vector<Resources> bundle_available;  // kCreated: what each bundle has left
  std::vector<Waiter> waiters;
  std::string reason;  // why it is pending
};

class PlacementGroupManager final : public DemandSource {
 public:
  PlacementGroupManager(HeadContext ctx, NodeManager& nodes, SchedulingQueue& queue)
      : ctx_(std::move(ctx)), nodes_(nodes), queue_(queue) {}
  // Called when a group is removed (its actors die with it).
  void SetOnRemoved(std::function<void(const std::string& pg_id)> f) { on_removed_ = std::move(f); }

  void OnCreate(const proto::PlacementGroupMsg& m, double now);
  void OnWait(const proto::PlacementGroupMsg& m, double now);
  void OnRemove(const proto::PlacementGroupMsg& m, double now);
  // Answers the waiters whose timeout passed.
  void Tick(double now);

  // Places `demand` inside group `pg_id` (bundle `bundle_index`, or any when < 0) and
  // reserves it there; *bundle_out is the bundle. Outcome as for nodes.
  Decision ReserveInBundle(const std::string& pg_id, int bundle_index, const Resources& demand,
                           int* bundle_out);
  // What an actor or lease held in a bundle goes back to it, or, the group being removed,
  // to the bundle's node.
  void ReleaseInBundle(const std::string& pg_id, int bundle, const Resources& demand);
  // Holds `demand` in bundle `bundle` of a created group (a restored actor or lease); false
  // when the group has no such bundle.
  bool HoldInBundle(const std::string& pg_id, int bundle, const Resources& demand);
  // The number of bundles of a created group; 0 for a pending one, -1 for an unknown one.
  int CreatedBundles(const std::string& pg_id) const;
  size_t size() const { return pgs_.size(); }
  // Every group by binary id (the head's metrics count them by state).
  const std::map<std::string, PgEntry>& all() const { return pgs_; }

  bool TryPlace(const std::string& id, double since, double now, std::string* reason) override;
  std::string Describe(const std::string& id) const override;

  // Rebuilds the groups from the "placement_groups" table (after the nodes).
  void Restore(const TableRecords& records, double now);

 private:
  Status Validate(const proto::PlacementGroupMsg& m) const;
  void Reply(const std::string& to, uint64_t request_id, const PgEntry* pg, bool ok,
             proto::ErrorKind kind, const std::string& message) const;
  void Persist(const PgEntry& pg);

  HeadContext ctx_;
  NodeManager& nodes_;
  SchedulingQueue& queue_;
  std::function<void(const std::string&)> on_removed_;
  std::map<std::string, PgEntry> pgs_;           // by binary id
  std::map<std::string, std::string> pg_names_;  // name -> binary id
};

}  // namespace orrery::scheduler
