// One request from the CLI to the head, a node or a driver and its answer (core/internal/ask.h),
// over an inbox on the host a driver would use: `orrery job submit|stop`, `orrery list
// workers|tasks`.
#pragma once

#include <string>

#include "core/internal/ask.h"

namespace orrery::cli {

// The host the CLI listens on for answers (Init's rule: $ORRERY_NODE_IP, else 127.0.0.1).
std::string AnswerHost();

template <typename Reply, typename Meta>
Result<Reply> Ask(const std::string& to, proto::MsgType type, Meta meta, proto::MsgType reply_type,
                  int timeout_ms, const std::string* payload = nullptr) {
  return orrery::Ask<Reply>(AnswerHost(), to, type, std::move(meta), reply_type, timeout_ms,
                            payload);
}

}  // namespace orrery::cli
