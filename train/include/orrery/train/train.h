// Orrery Train's public header (DESIGN.md section 7): the configs, the loop's Context and
// TorchTrainer. The libtorch integration is apart, in orrery/train/torch.h.
#pragma once

#include "orrery/orrery.h"
#include "orrery/train/config.h"
#include "orrery/train/context.h"
#include "orrery/train/trainer.h"
