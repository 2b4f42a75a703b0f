// Turning error records that travel on the wire back into orrery::Error exceptions.
#pragma once

#include <string>

#include "actors/src/object_store.h"

namespace orrery::runtime {

[[noreturn]] void ThrowError(const ObjectError& error);
[[noreturn]] void ThrowKind(proto::ErrorKind kind, const std::string& message);
// The demangled type name of the exception being handled (inside a catch block).
std::string CurrentExceptionType(const std::exception* e);

}  // namespace orrery::runtime
