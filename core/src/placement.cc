#include "orrery/placement.h"

namespace orrery {

const char* PlacementStrategyName(PlacementStrategy s) {
  switch (s) {
    case PlacementStrategy::PACK:
      return "PACK";
    case PlacementStrategy::SPREAD:
      return "SPREAD";
    case PlacementStrategy::STRICT_PACK:
      return "STRICT_PACK";
    case PlacementStrategy::STRICT_SPREAD:
      return "STRICT_SPREAD";
  }
  return "UNKNOWN";
}

}  // namespace orrery
