#include "orrery/errors.h"

namespace orrery {

namespace {
std::string Compose(const std::string& type, const std::string& message,
                    const std::string& function, const std::string& where) {
  std::string out = type.empty() ? "exception" : type;
  out += " in " + (function.empty() ? std::string("remote call") : function);
  if (!where.empty()) out += " (" + where + ")";
  out += ": " + message;
  return out;
}
}  // namespace

RemoteError::RemoteError(std::string type, std::string message, std::string function,
                         std::string where)
    : Error(Compose(type, message, function, where)),
      type_(std::move(type)),
      message_(std::move(message)),
      function_(std::move(function)),
      where_(std::move(where)) {}

}  // namespace orrery
