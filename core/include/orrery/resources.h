// Resource sets and the validation rules users meet (as in Ray): names are non-empty,
// values are > 0, and a value above 1 must be a whole number.
#pragma once

#include <string>

#include "orrery/config.h"
#include "orrery/status.h"

namespace orrery {

// OK, or InvalidArgument naming the offending entry.
Status ValidateResources(const Resources& demand);

// True when every entry of `demand` is available in `available`.
bool Fits(const Resources& demand, const Resources& available);

// available -= demand (entries dropping to ~0 are kept at 0).
void Subtract(Resources& available, const Resources& demand);
void Add(Resources& available, const Resources& amount);

// "{CPU: 1, TPU: 4}"
std::string ToString(const Resources& resources);
std::string ToString(const Labels& labels);

}  // namespace orrery
