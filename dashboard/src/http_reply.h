// One HTTP answer of the dashboard, independent of the HTTP library (so routing and
// authentication are pure functions that unit tests and the fuzzer call directly).
#pragma once

#include <map>
#include <string>

namespace orrery::dashboard {

// The content type of every JSON answer.
inline constexpr const char* kJsonType = "application/json; charset=utf-8";

struct HttpReply {
  int status = 200;
  std::string content_type;
  std::string body;
  std::map<std::string, std::string> headers;
};

}  // namespace orrery::dashboard
