#include "train/src/reduce_ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "orrery/errors.h"

namespace orrery::train {

namespace {

// acc[i] = op(acc[i], src[i]) for n elements; src aligned for T.
template <typename T>
void Combine(T* acc, const T* src, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      for (size_t i = 0; i < n; ++i) acc[i] += src[i];
      break;
    case ReduceOp::kProduct:
      for (size_t i = 0; i < n; ++i) acc[i] *= src[i];
      break;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], src[i]);
      break;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], src[i]);
      break;
  }
}

template <typename T>
void ReduceTyped(T* dst, const char* src_bytes, size_t n, ReduceOp op) {
  // The source may sit at any address inside a message: read it through memcpy.
  constexpr size_t kBlock = 4096;
  T tmp[kBlock];
  for (size_t at = 0; at < n; at += kBlock) {
    size_t m = std::min(kBlock, n - at);
    std::memcpy(tmp, src_bytes + at * sizeof(T), m * sizeof(T));
    Combine(dst + at, tmp, m, op);
  }
}

template <typename T>
void DivideTyped(T* d, size_t n, int by) {
  for (size_t i = 0; i < n; ++i) d[i] /= T(by);
}

template <typename T>
void FoldTyped(char* out1, char* out2, const std::vector<const char*>& sources, size_t count,
               ReduceOp op) {
  constexpr size_t kBlock = 16 * 1024 / sizeof(T);  // stays in the first-level cache
  alignas(64) T acc[kBlock];
  bool aligned = true;
  for (const char* s : sources)
    aligned = aligned && reinterpret_cast<uintptr_t>(s) % alignof(T) == 0;
  for (size_t at = 0; at < count; at += kBlock) {
    const size_t m = std::min(kBlock, count - at), bytes = m * sizeof(T);
    std::memcpy(acc, sources[0] + at * sizeof(T), bytes);
    for (size_t p = 1; p < sources.size(); ++p) {
      const char* src = sources[p] + at * sizeof(T);
      if (aligned) {
        Combine(acc, reinterpret_cast<const T*>(src), m, op);
      } else {
        ReduceTyped(acc, src, m, op);
      }
    }
    std::memcpy(out1 + at * sizeof(T), acc, bytes);
    if (out2 != nullptr) std::memcpy(out2 + at * sizeof(T), acc, bytes);
  }
}

}  // namespace

size_t ElementSize(int dtype) {
  switch (dtype) {
    case 0:
      return sizeof(float);
    case 1:
      return sizeof(double);
    case 2:
      return sizeof(int32_t);
    case 3:
      return sizeof(int64_t);
  }
  throw TrainingFailedError("collective: unknown element type " + std::to_string(dtype));
}

void Reduce(char* dst, const char* src, size_t n, int dtype, ReduceOp op) {
  switch (dtype) {
    case 0:
      return ReduceTyped(reinterpret_cast<float*>(dst), src, n, op);
    case 1:
      return ReduceTyped(reinterpret_cast<double*>(dst), src, n, op);
    case 2:
      return ReduceTyped(reinterpret_cast<int32_t*>(dst), src, n, op);
    case 3:
      return ReduceTyped(reinterpret_cast<int64_t*>(dst), src, n, op);
  }
}

void Fold(char* out1, char* out2, const std::vector<const char*>& sources, size_t count, int dtype,
          ReduceOp op) {
  switch (dtype) {
    case 0:
      return FoldTyped<float>(out1, out2, sources, count, op);
    case 1:
      return FoldTyped<double>(out1, out2, sources, count, op);
    case 2:
      return FoldTyped<int32_t>(out1, out2, sources, count, op);
    case 3:
      return FoldTyped<int64_t>(out1, out2, sources, count, op);
  }
  throw TrainingFailedError("collective: unknown element type " + std::to_string(dtype));
}

void Divide(char* data, size_t n, int dtype, int by) {
  switch (dtype) {
    case 0:
      return DivideTyped(reinterpret_cast<float*>(data), n, by);
    case 1:
      return DivideTyped(reinterpret_cast<double*>(data), n, by);
    case 2:
      return DivideTyped(reinterpret_cast<int32_t*>(data), n, by);
    case 3:
      return DivideTyped(reinterpret_cast<int64_t*>(data), n, by);
  }
}

}  // namespace orrery::train
