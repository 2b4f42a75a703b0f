// Worker <-> node: a new worker registers with its node, which assigns it an actor or a
// task lease, and tells it to exit.
#pragma once

#include <string>

#include "core/src/protocol_node.h"

namespace orrery::proto {

struct WorkerRegisterMsg {
  std::string worker_id;
  std::string address;  // the worker's runtime inbox (control, replies, objects)
  int pid = 0;
  std::string call_address;  // where callers send kCall
  MSGPACK_DEFINE(worker_id, address, pid, call_address);
};

struct AssignMsg {
  std::string worker_id;
  bool is_actor = false;
  StartActorMsg actor;
  std::string node_id;
  std::string head_address;
  MSGPACK_DEFINE(worker_id, is_actor, actor, node_id, head_address);
};

struct AssignReplyMsg {
  std::string worker_id;
  std::string actor_id;
  bool ok = true;
  ErrorKind error_kind = ErrorKind::kNone;
  std::string error_type;
  std::string message;
  MSGPACK_DEFINE(worker_id, actor_id, ok, error_kind, error_type, message);
};

}  // namespace orrery::proto
