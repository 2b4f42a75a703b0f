#include "core/internal/session_dir.h"

#include <cstdlib>

namespace orrery {

std::string SessionRoot() {
  const char* t = std::getenv("ORRERY_TMPDIR");
  return t && *t ? t : "/tmp/orrery";
}

}  // namespace orrery
