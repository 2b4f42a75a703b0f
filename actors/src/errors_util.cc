#include "actors/src/errors_util.h"

#include <cxxabi.h>

#include <cstdlib>
#include <typeinfo>

#include "orrery/errors.h"

namespace orrery::runtime {

void ThrowKind(proto::ErrorKind kind, const std::string& message) {
  proto::ThrowErrorOfKind(kind, message);
}

void ThrowError(const ObjectError& e) {
  if (e.kind == proto::ErrorKind::kRemoteError)
    throw RemoteError(e.type, e.message, e.function, e.where);
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
