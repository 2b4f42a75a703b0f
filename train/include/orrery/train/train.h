// Orrery Train's public header (docs/train.md): the configs, the loop's Context and
// TorchTrainer. The libtorch integration is apart, in orrery/train/torch.h.
#pragma once

#include "orrery/orrery.h"
#include "orrery/train/config.h"
#include "orrery/train/context.h"
#include "orrery/train/trainer.h"
