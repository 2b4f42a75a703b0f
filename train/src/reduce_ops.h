// Element-wise reductions over the vectors of the train collectives (collective.h): the
// element types are Context's codes (0 float, 1 double, 2 int32, 3 int64).
#pragma once

#include <cstddef>
#include <vector>

#include "orrery/train/context.h"

namespace orrery::train {

// The bytes of one element; throws TrainingFailedError for an unknown code.
size_t ElementSize(int dtype);

// dst[i] = op(dst[i], src[i]) for n elements of dtype; src may sit at any address.
void Reduce(char* dst, const char* src, size_t n, int dtype, ReduceOp op);

// Folds sources[0..) with op in their order, element by element, and writes the result to
// out1 and out2 (out1 may be one of the sources; out2 may be null). Works block by block, so each
// source is read once and each output written once.
void Fold(char* out1, char* out2, const std::vector<const char*>& sources, size_t count, int dtype,
          ReduceOp op);

// data[i] /= by for n elements of dtype (kAvg's last step).
void Divide(char* data, size_t n, int dtype, int by);

}  // namespace orrery::train
