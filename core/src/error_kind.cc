#include "core/internal/error_kind.h"

namespace orrery::proto {

const char* ErrorKindName(ErrorKind kind) {
  if (kind == ErrorKind::kNone) return "";
  switch (kind) {
#define ORRERY_ERROR_NAME(name, value) \
  case ErrorKind::k##name:             \
    return #name;
    ORRERY_ERROR_KINDS(ORRERY_ERROR_NAME)
#undef ORRERY_ERROR_NAME
  }
  return "Error";
}

ErrorKind ErrorKindFromName(std::string_view name) {
  if (name.empty()) return ErrorKind::kNone;
#define ORRERY_ERROR_MATCH(n, value) \
  if (name == #n && ErrorKind::k##n != ErrorKind::kNone) return ErrorKind::k##n;
  ORRERY_ERROR_KINDS(ORRERY_ERROR_MATCH)
#undef ORRERY_ERROR_MATCH
  return ErrorKind::kError;
}

void ThrowErrorOfKind(ErrorKind kind, const std::string& message) {
  VisitError(kind, message, [](const auto& e) { throw e; });
  throw Error(message);  // not reached: every visit throws
}

}  // namespace orrery::proto
