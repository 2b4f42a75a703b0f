#include "cli/src/head_request.h"

#include "orrery/config.h"
#include "orrery/orrery.h"

namespace orrery::cli {

std::string AnswerHost() {
  std::string host = ApplyEnvironment(Config{}).node_ip;
  return host.empty() ? "127.0.0.1" : host;
}

}  // namespace orrery::cli
