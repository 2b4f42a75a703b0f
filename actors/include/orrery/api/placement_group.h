// Placement groups: sets of resource bundles reserved together (docs/api.md "Placement groups").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "orrery/config.h"
#include "orrery/ids.h"
#include "orrery/placement.h"

namespace orrery {

struct PlacementGroupCreationOptions {
  std::string name;
  std::vector<Resources> bundles;
  PlacementStrategy strategy = PlacementStrategy::PACK;
  // When non-empty, every bundle must land on nodes sharing one value of this label
  // (e.g. "orrery.io/tpu-slice-name").
  std::string same_label;
  Labels label_selector;
  bool detached = false;
};

class PlacementGroup {
 public:
  PlacementGroup() = default;
  PlacementGroup(PlacementGroupId id, PlacementGroupCreationOptions options)
      : id_(std::move(id)), options_(std::move(options)) {}

  const PlacementGroupId& Id() const { return id_; }
  const std::string& Name() const { return options_.name; }
  const std::vector<Resources>& Bundles() const { return options_.bundles; }
  PlacementStrategy Strategy() const { return options_.strategy; }
  // True once every bundle is reserved; false when timeout_seconds passed first.
  bool Wait(double timeout_seconds) const;
  bool Empty() const { return id_.IsNil(); }
  // Set by CreatePlacementGroup when the head placed every bundle at once: Wait then need
  // not ask again (unless this process removed the group).
  void MarkReadyAtCreation() { ready_at_creation_ = true; }

 private:
  PlacementGroupId id_;
  PlacementGroupCreationOptions options_;
  bool ready_at_creation_ = false;
};

// Validates (ConfigError on an empty group or bad bundle) and asks the head to reserve.
PlacementGroup CreatePlacementGroup(const PlacementGroupCreationOptions& options);
// Asks the head to release the group (asynchronous, as in Ray); actors in it are stopped.
void RemovePlacementGroup(const PlacementGroupId& id);
std::optional<PlacementGroup> GetPlacementGroup(const std::string& name);

}  // namespace orrery
