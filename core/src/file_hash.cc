#include "core/internal/file_hash.h"

#include <sys/utsname.h>

#include <cstdlib>

#include "core/internal/security.h"

namespace orrery {

std::string HashBytes(const std::string& bytes) { return security::Sha256Hex(bytes); }

std::string HashFile(const std::string& path) {
  Result<std::string> h = security::Sha256File(path);
  return h.ok() ? h.value() : std::string();
}

bool IsContentHash(const std::string& hash) {
  if (hash.size() != 64) return false;
  for (char c : hash)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string MachineArch() {
  if (const char* a = std::getenv("ORRERY_ARCH"); a && *a) return a;
  utsname u;
  return uname(&u) == 0 ? u.machine : "unknown";
}

}  // namespace orrery
