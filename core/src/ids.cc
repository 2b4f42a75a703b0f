#include "orrery/ids.h"

#include <random>

namespace orrery {

namespace {
// splitmix64 seeded per thread from random_device: ids are made on the call path, so this
// must be cheap, and unique across processes (the seed differs per process and thread).
uint64_t NextRandom() {
  thread_local uint64_t state = [] {
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ rd() ^ uint64_t(reinterpret_cast<uintptr_t>(&state));
  }();
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

UniqueId UniqueId::Random() {
  UniqueId id;
  uint64_t a = NextRandom(), b = NextRandom();
  std::memcpy(id.bytes_.data(), &a, 8);
  std::memcpy(id.bytes_.data() + 8, &b, 8);
  return id;
}

UniqueId UniqueId::FromHex(const std::string& hex) {
  UniqueId id;
  if (hex.size() != kSize * 2) return id;
  for (size_t i = 0; i < kSize; ++i) {
    int hi = HexValue(hex[2 * i]), lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return UniqueId();
    id.bytes_[i] = uint8_t(hi * 16 + lo);
  }
  return id;
}

UniqueId UniqueId::FromBinary(const std::string& binary) {
  UniqueId id;
  if (binary.size() == kSize) std::memcpy(id.bytes_.data(), binary.data(), kSize);
  return id;
}

bool UniqueId::IsNil() const {
  for (uint8_t b : bytes_)
    if (b) return false;
  return true;
}

std::string UniqueId::Hex() const {
  static const char* digits = "0123456789abcdef";
  std::string out(kSize * 2, '0');
  for (size_t i = 0; i < kSize; ++i) {
    out[2 * i] = digits[bytes_[i] >> 4];
    out[2 * i + 1] = digits[bytes_[i] & 15];
  }
  return out;
}

}  // namespace orrery
