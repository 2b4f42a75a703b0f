// The ScalingConfig the train unit tests start from: a v4 slice of 2x2x2 (two hosts of four
// chips), one worker per host by default.
#pragma once

#include "orrery/train/config.h"

namespace orrery::train {

inline ScalingConfig V4Slice(int workers = 2) {
  return ScalingConfig{.num_workers = workers,
                       .use_tpu = true,
                       .resources_per_worker = {{"TPU", 4}},
                       .topology = "2x2x2",
                       .accelerator_type = "TPU-V4",
                       .placement_strategy = "SPREAD"};
}

}  // namespace orrery::train
