#include "core/src/file_hash.h"

#include <sys/utsname.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <vector>

namespace orrery {

namespace {
struct Hasher {
  uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull, size = 0;
  void Update(const char* data, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      uint8_t c = uint8_t(data[i]);
      a = (a ^ c) * 0x100000001b3ull;
      b = (b ^ uint8_t(c + 0x5b)) * 0x100000001b3ull;
    }
    size += n;
  }
  std::string Hex() const;
};
}  // namespace

std::string HashBytes(const std::string& bytes) {
  Hasher h;
  h.Update(bytes.data(), bytes.size());
  return h.Hex();
}

std::string HashFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  Hasher h;
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    h.Update(buf.data(), size_t(in.gcount()));
  }
  return h.Hex();
}

std::string Hasher::Hex() const {
  uint64_t a = this->a, b = this->b ^ (size * 0x9E3779B97F4A7C15ull);
  static const char* d = "0123456789abcdef";
  std::string out;
  for (uint64_t v : {a, b})
    for (int s = 60; s >= 0; s -= 4) out.push_back(d[(v >> s) & 15]);
  return out;
}

std::string MachineArch() {
  if (const char* a = std::getenv("ORRERY_ARCH"); a && *a) return a;
  utsname u;
  return uname(&u) == 0 ? u.machine : "unknown";
}

}  // namespace orrery
