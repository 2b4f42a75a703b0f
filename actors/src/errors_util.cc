#include "actors/src/errors_util.h"

#include <cxxabi.h>

#include <cstdlib>
#include <typeinfo>

#include "orrery/api/serialize.h"
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

CallFailure FailureOf(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const ObjectLostError& ex) {
    return {proto::ErrorKind::kObjectLostError, "", ex.what()};
  } catch (const ObjectStoreFullError& ex) {
    return {proto::ErrorKind::kObjectStoreFullError, "", ex.what()};
  } catch (const TaskCancelledError& ex) {  // a stream's or async call's caller cancelled it
    return {proto::ErrorKind::kTaskCancelledError, "", ex.what()};
  } catch (const internal::ConvertError& ex) {
    return {proto::ErrorKind::kRemoteError, "orrery::ArgumentError", ex.what()};
  } catch (const std::exception& ex) {
    return {proto::ErrorKind::kRemoteError, CurrentExceptionType(&ex), ex.what()};
  } catch (...) {
    return {proto::ErrorKind::kRemoteError, CurrentExceptionType(nullptr),
            "a non-standard exception"};
  }
}

}  // namespace orrery::runtime
