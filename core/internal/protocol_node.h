// Node <-> head: registration and heartbeats, what the head tells a node to run or stop,
// and the node's worker events (docs/protocol.md "Node-scoped messages").
#pragma once

#include <string>

#include "core/internal/protocol_head.h"

namespace orrery::proto {

struct RegisterNodeMsg {
  NodeInfoMsg node;
  std::string reply_to;
  // A random secret the node chose for its life and sends with every registration,
  // heartbeat, goodbye and worker event: the head acts on a node-scoped message only when it
  // carries the secret the node registered with (docs/protocol.md "Node-scoped messages").
  std::string node_secret;
  MSGPACK_DEFINE(node, reply_to, node_secret);
};

struct StartActorMsg {
  ActorSpecMsg spec;
  int incarnation = 0;
  MSGPACK_DEFINE(spec, incarnation);
};

struct GrantLeaseMsg {
  LeaseRequestMsg request;
  MSGPACK_DEFINE(request);
};

struct KillWorkerMsg {
  std::string actor_id;
  std::string lease_id;
  std::string reason;
  MSGPACK_DEFINE(actor_id, lease_id, reason);
};

enum class WorkerEventKind : int {
  kActorAlive = 0,
  kActorDied = 1,
  kLeaseWorkerDied = 2,
  kLeaseFailed = 3,
  // A worker process exited (after its kActorDied or kLeaseWorkerDied): `control_address` was
  // its runtime's inbox. The leases it asked for (an actor or task that submits tasks) end.
  kProcessExited = 4
};

struct WorkerEventMsg {
  int kind = 0;
  std::string node_id;
  std::string actor_id;
  std::string lease_id;
  int incarnation = 0;
  std::string address;
  int pid = 0;
  ErrorKind error_kind = ErrorKind::kNone;
  std::string cause;
  std::string node_secret;      // the sending node's (RegisterNodeMsg::node_secret)
  std::string control_address;  // kActorAlive: the worker's runtime inbox; appended
  // Appended last: the head acknowledges the event (kAck with this id) to reply_to; the
  // node sends it again until then (node/src/head_events.h).
  uint64_t request_id = 0;
  std::string reply_to;
  MSGPACK_DEFINE(kind, node_id, actor_id, lease_id, incarnation, address, pid, error_kind, cause,
                 node_secret, control_address, request_id, reply_to);
};

struct ReleaseLeaseMsg {
  std::string lease_id;
  MSGPACK_DEFINE(lease_id);
};

}  // namespace orrery::proto
