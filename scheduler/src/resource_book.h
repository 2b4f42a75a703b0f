// Who holds what: reserves a demand's resources on a node (chosen by the scheduling
// policies) or in a bundle of its placement group, and gives them back. Used by the actor
// and lease managers; docs/architecture.md "The head".
#pragma once

#include <map>
#include <string>

#include "orrery/scheduler/policy.h"
#include "scheduler/src/autoscaler_view.h"
#include "scheduler/src/node_manager.h"
#include "scheduler/src/placement_group_manager.h"

namespace orrery::scheduler {

// What a demand asks for and where it may go (fields of an actor's options or a lease request).
struct DemandRef {
  const Resources& resources;
  const Labels& selector;
  int strategy;
  const std::string& affinity_node;
  bool affinity_soft;
  const std::string& placement_group;
  int bundle_index;
};

class ResourceBook {
 public:
  ResourceBook(NodeManager& nodes, PlacementGroupManager& pgs, const AutoscalerView* autoscaler)
      : nodes_(nodes), pgs_(pgs), autoscaler_(autoscaler) {}
  // Chooses a node (or a bundle of the demand's placement group, set in *bundle, else -1)
  // and, when placed, reserves the resources there. A demand no node could hold but a node
  // of an autoscaler group could waits (kWait) for the autoscaler.
  Decision Reserve(const DemandRef& demand, int* bundle);
  // Gives back what a demand placed on `node` (or in `bundle` of `pg_id`) held.
  void Release(int node, const std::string& pg_id, int bundle, const Resources& demand);
  // Holds what a demand recovered from the store still holds: in its bundle when the group
  // has it (else *bundle becomes -1), otherwise on its node.
  void Hold(int node, const std::string& pg_id, int* bundle, const Resources& demand);

 private:
  // At most this many demand shapes keep a packing cursor.
  static constexpr size_t kMaxCursors = 1024;

  // An infeasible decision, seen in the light of the autoscaler's groups.
  void ConsiderAutoscaler(const DemandRef& demand, Decision& decision) const;

  NodeManager& nodes_;
  PlacementGroupManager& pgs_;
  const AutoscalerView* autoscaler_;
  size_t round_robin_ = 0;
  // Per demand shape (resources and selector): the node the last such demand was packed on,
  // valid while nodes_.epoch() is cursor_epoch_ (ScheduleHybridFrom).
  std::map<std::string, size_t> cursors_;
  uint64_t cursor_epoch_ = 0;
};

}  // namespace orrery::scheduler
