#include "train/src/reduce_ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "orrery/errors.h"

namespace orrery::train {

namespace {

template <typename T>
void ReduceTyped(T* dst, const char* src_bytes, size_t n, ReduceOp op) {
  // The source may sit at any address inside a message: read it through memcpy.
  constexpr size_t kBlock = 4096;
  T tmp[kBlock];
  for (size_t at = 0; at < n; at += kBlock) {
    size_t m = std::min(kBlock, n - at);
    std::memcpy(tmp, src_bytes + at * sizeof(T), m * sizeof(T));
    T* d = dst + at;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        for (size_t i = 0; i < m; ++i) d[i] += tmp[i];
        break;
      case ReduceOp::kProduct:
        for (size_t i = 0; i < m; ++i) d[i] *= tmp[i];
        break;
      case ReduceOp::kMin:
        for (size_t i = 0; i < m; ++i) d[i] = std::min(d[i], tmp[i]);
        break;
      case ReduceOp::kMax:
        for (size_t i = 0; i < m; ++i) d[i] = std::max(d[i], tmp[i]);
        break;
    }
  }
}

template <typename T>
void DivideTyped(T* d, size_t n, int by) {
  for (size_t i = 0; i < n; ++i) d[i] /= T(by);
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
  constexpr size_t kBlockBytes = 16 * 1024;  // a multiple of every element size
  alignas(64) char acc[kBlockBytes];
  const size_t esize = ElementSize(dtype), bytes = count * esize;
  for (size_t at = 0; at < bytes; at += kBlockBytes) {
    size_t len = std::min(kBlockBytes, bytes - at);
    std::memcpy(acc, sources[0] + at, len);
    for (size_t p = 1; p < sources.size(); ++p)
      Reduce(acc, sources[p] + at, len / esize, dtype, op);
    std::memcpy(out1 + at, acc, len);
    std::memcpy(out2 + at, acc, len);
  }
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
