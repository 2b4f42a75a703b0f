#include "orrery/version.h"

#include <string>

#include "core/internal/protocol_wire.h"
#include "orrery_project_version.h"  // generated: ORRERY_PROJECT_VERSION

namespace orrery {

const char* Version() { return ORRERY_PROJECT_VERSION; }

int ProtocolVersion() { return proto::kProtocolVersion; }

const char* VersionLine() {
  static const std::string line = std::string("orrery ") + Version() + " (protocol version " +
                                  std::to_string(ProtocolVersion()) + ")";
  return line.c_str();
}

}  // namespace orrery
