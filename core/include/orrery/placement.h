// Placement strategies for placement groups (docs/api.md "Placement groups").
#pragma once

namespace orrery {

enum class PlacementStrategy { PACK = 0, SPREAD = 1, STRICT_PACK = 2, STRICT_SPREAD = 3 };

const char* PlacementStrategyName(PlacementStrategy s);

}  // namespace orrery
