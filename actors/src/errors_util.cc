#include "actors/src/errors_util.h"

#include <cxxabi.h>

#include <cstdlib>
#include <typeinfo>

#include "orrery/errors.h"

namespace orrery::runtime {

void ThrowKind(const std::string& kind, const std::string& message) {
  if (kind == "ActorDiedError") throw ActorDiedError(message);
  if (kind == "GetTimeoutError") throw GetTimeoutError(message);
  if (kind == "InfeasibleError") throw InfeasibleError(message);
  if (kind == "PlacementGroupError") throw PlacementGroupError(message);
  if (kind == "FunctionNotFoundError") throw FunctionNotFoundError(message);
  if (kind == "ConfigError") throw ConfigError(message);
  if (kind == "ConnectionError") throw ConnectionError(message);
  if (kind == "AcceleratorNotAvailableError") throw AcceleratorNotAvailableError(message);
  if (kind == "TrainingFailedError") throw TrainingFailedError(message);
  if (kind == "OutOfMemoryError") throw OutOfMemoryError(message);
  if (kind == "WorkerCrashedError") throw WorkerCrashedError(message);
  throw Error(message);
}

void ThrowError(const ObjectError& e) {
  if (e.kind == "RemoteError") throw RemoteError(e.type, e.message, e.function, e.where);
  ThrowKind(e.kind, e.message);
}

std::string CurrentExceptionType(const std::exception* e) {
  const std::type_info* t = e ? &typeid(*e) : abi::__cxa_current_exception_type();
  if (!t) return "unknown";
  int status = 0;
  char* name = abi::__cxa_demangle(t->name(), nullptr, nullptr, &status);
  std::string out = status == 0 && name ? name : t->name();
  std::free(name);
  return out;
}

}  // namespace orrery::runtime
