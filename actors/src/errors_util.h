// Turning error records that travel on the wire back into orrery::Error exceptions.
#pragma once

#include <exception>
#include <string>

#include "actors/src/object_store.h"

namespace orrery::runtime {

[[noreturn]] void ThrowError(const ObjectError& error);
[[noreturn]] void ThrowKind(proto::ErrorKind kind, const std::string& message);
// The demangled type name of the exception being handled (inside a catch block).
std::string CurrentExceptionType(const std::exception* e);

// How a call that threw `error` is reported to its caller: the kind of error its Get throws,
// the user exception's type (for RemoteError) and the message.
struct CallFailure {
  proto::ErrorKind kind = proto::ErrorKind::kRemoteError;
  std::string type;
  std::string message;
};
CallFailure FailureOf(std::exception_ptr error);

}  // namespace orrery::runtime
