// The wire protocol shared by drivers, workers, nodes and the head (docs/protocol.md).
//
// A message is a ZeroMQ multipart message:
//   frame 0: 4-byte header {'O', 'R', kProtocolVersion, MsgType} followed by the msgpack
//            encoding of the message's meta struct (an array, MSGPACK_DEFINE order);
//   frame 1: optional payload (msgpack bytes: call arguments or a result value).
// A ROUTER prepends the sender identity frame; Inbox strips it.
//
// Decoding never throws: malformed input becomes a Status that the receiver logs and
// answers with a kError message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "orrery/api/serialize.h"
#include "orrery/status.h"

namespace orrery::proto {

inline constexpr uint8_t kMagic0 = 'O';
inline constexpr uint8_t kMagic1 = 'R';
inline constexpr uint8_t kProtocolVersion = 1;
inline constexpr size_t kHeaderSize = 4;

enum class MsgType : uint8_t {
  kError = 1,  // reply to a malformed or unknown message: ErrorMsg

  // Calls, between any process and a worker.
  kCall = 10,         // CallMsg + payload (args array)
  kCallReply = 11,    // ReplyMsg + payload (result)
  kGetObject = 12,    // GetObjectMsg: ask an owner for an object's value
  kObjectReply = 13,  // ReplyMsg + payload

  // Driver/worker -> head.
  kCreateActor = 20,
  kCreateActorReply = 21,
  kSubscribeActor = 22,
  kActorUpdate = 23,  // head -> subscribers
  kGetNamedActor = 24,
  kGetNamedActorReply = 25,
  kKillActor = 26,
  kRequestLease = 27,
  kLeaseReply = 28,  // node or head -> requester
  kReturnLease = 29,
  kCreatePlacementGroup = 30,
  kPlacementGroupReply = 31,
  kRemovePlacementGroup = 32,
  kWaitPlacementGroup = 33,
  kGetClusterInfo = 34,
  kClusterInfoReply = 35,
  kAck = 36,          // generic reply: AckMsg
  kRegisterJob = 37,  // driver -> head, also its heartbeat: JobMsg
  kPutBinary = 38,    // driver -> head: BinaryMsg + payload (the driver's executable)
  kFetchBinary = 39,  // node -> head: BinaryMsg
  kBinaryReply = 46,  // head -> node: BinaryMsg + payload
  kPutRecord = 47,    // driver -> head: RecordMsg (a training run's record and metrics)

  // Node <-> head.
  kRegisterNode = 40,
  kStartActor = 41,    // head -> node
  kGrantLease = 42,    // head -> node
  kKillWorker = 43,    // head -> node
  kWorkerEvent = 44,   // node -> head: actor alive, actor/lease worker exited
  kReleaseLease = 45,  // head -> node: the lease's worker is idle again

  // Worker <-> node.
  kWorkerRegister = 50,
  kAssign = 51,       // node -> worker: become this actor / serve leases
  kAssignReply = 52,  // worker -> node
  kExit = 53,         // node -> worker: exit now

  kPing = 60,
  kPong = 61,
};

bool IsKnownType(uint8_t type);

// Where this process's request ids start: random per process (never 0, with room for 2^62
// requests before wrapping), so that request ids are unique across processes and a stale
// reply addressed to an earlier process on the same address matches nothing here.
uint64_t RequestIdBase();
const char* TypeName(MsgType type);

// A decoded frame 0: the type and the meta bytes (a view into the frame).
struct Header {
  MsgType type;
  std::string_view meta;
};

// Validates magic, version and type. Never throws.
Result<Header> DecodeHeader(const void* data, size_t size);

// Frame 0 for a message: header + packed meta.
template <typename Meta>
std::string EncodeFrame(MsgType type, const Meta& meta) {
  std::string out;
  out.reserve(64);
  out.push_back(char(kMagic0));
  out.push_back(char(kMagic1));
  out.push_back(char(kProtocolVersion));
  out.push_back(char(type));
  internal::StringWriter w{out};
  msgpack::pack(w, meta);
  return out;
}

// Unpacks meta bytes into T within internal::kControlUnpackLimits. Never throws: a wrong
// shape or type, or a limit reached, is InvalidArgument.
template <typename T>
Status DecodeMeta(std::string_view meta, T* out) {
  try {
    msgpack::object_handle oh =
        internal::UnpackUntrusted(meta.data(), meta.size(), internal::kControlUnpackLimits);
    oh.get().convert(*out);
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("malformed message body: ") + e.what());
  }
}

// ---- Message bodies. Ids travel as 16-byte binary strings. ----

struct ErrorMsg {
  uint64_t request_id = 0;
  std::string message;
  MSGPACK_DEFINE(request_id, message);
};

struct AckMsg {
  uint64_t request_id = 0;
  bool ok = true;
  std::string error_kind;  // orrery::Error subclass name when !ok
  std::string message;
  MSGPACK_DEFINE(request_id, ok, error_kind, message);
};

struct CallMsg {
  uint64_t request_id = 0;
  std::string object_id;  // id of the return object
  std::string reply_to;   // caller's inbox address
  std::string actor_id;   // empty: a task
  uint64_t seq = 0;       // per (caller, actor incarnation) order
  std::string function;   // registered name
  std::string lease_id;   // tasks: the lease it runs under
  MSGPACK_DEFINE(request_id, object_id, reply_to, actor_id, seq, function, lease_id);
};

struct ReplyMsg {
  std::string object_id;
  bool ok = true;
  std::string error_kind;  // "RemoteError", "FunctionNotFoundError", "ActorDiedError", ...
  std::string error_type;  // RemoteError: the C++ type of the user's exception
  std::string message;
  std::string function;
  std::string where;     // node and pid
  std::string actor_id;  // echoed from the call
  uint64_t seq = 0;
  std::string lease_id;
  MSGPACK_DEFINE(object_id, ok, error_kind, error_type, message, function, where, actor_id, seq,
                 lease_id);
};

struct GetObjectMsg {
  std::string object_id;
  std::string reply_to;
  MSGPACK_DEFINE(object_id, reply_to);
};

struct ActorOptionsMsg {
  std::map<std::string, double> resources;
  std::map<std::string, std::string> label_selector;
  std::string name;
  std::string namespace_;
  int max_restarts = 0;
  int max_task_retries = 0;
  int max_concurrency = 1;
  int lifetime = 0;
  std::string placement_group;
  int bundle_index = -1;
  int strategy = 0;  // 0 default, 1 spread, 2 node affinity
  std::string affinity_node;
  bool affinity_soft = false;
  MSGPACK_DEFINE(resources, label_selector, name, namespace_, max_restarts, max_task_retries,
                 max_concurrency, lifetime, placement_group, bundle_index, strategy, affinity_node,
                 affinity_soft);
};

struct ActorSpecMsg {
  std::string actor_id;
  std::string job_id;
  std::string factory;
  std::string args;   // msgpack array
  std::string owner;  // owner's inbox address
  ActorOptionsMsg options;
  double infeasible_timeout_s = 5;
  std::vector<std::string> argv;  // the driver's command line; argv[0] is its executable
  std::string binary_hash;        // content of argv[0]; empty: use the path as it is
  std::string arch;               // the architecture it was built for
  MSGPACK_DEFINE(actor_id, job_id, factory, args, owner, options, infeasible_timeout_s, argv,
                 binary_hash, arch);
};

struct CreateActorMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  ActorSpecMsg spec;
  MSGPACK_DEFINE(request_id, reply_to, spec);
};

enum class ActorState : int { kPending = 0, kAlive = 1, kRestarting = 2, kDead = 3 };

struct ActorUpdateMsg {
  std::string actor_id;
  int state = 0;  // ActorState
  std::string address;
  int incarnation = 0;
  std::string death_kind;  // orrery::Error subclass for callers: ActorDiedError, InfeasibleError
  std::string death_cause;
  std::string node_id;
  int pid = 0;
  MSGPACK_DEFINE(actor_id, state, address, incarnation, death_kind, death_cause, node_id, pid);
};

struct SubscribeActorMsg {
  std::string actor_id;
  std::string reply_to;
  MSGPACK_DEFINE(actor_id, reply_to);
};

struct NamedActorMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  std::string name;
  std::string namespace_;
  std::string actor_id;  // reply: empty when not found
  MSGPACK_DEFINE(request_id, reply_to, name, namespace_, actor_id);
};

struct KillActorMsg {
  std::string actor_id;
  bool no_restart = true;
  MSGPACK_DEFINE(actor_id, no_restart);
};

struct LeaseRequestMsg {
  uint64_t request_id = 0;
  std::string lease_id;
  std::string reply_to;
  std::map<std::string, double> resources;
  std::map<std::string, std::string> label_selector;
  std::string placement_group;
  int bundle_index = -1;
  double infeasible_timeout_s = 5;
  std::string job_id;
  std::vector<std::string> argv;  // the driver's command line; argv[0] is its executable
  int strategy = 0;
  std::string affinity_node;
  bool affinity_soft = false;
  std::string binary_hash;
  std::string arch;
  // The retries of the tasks this lease runs (-1: forever): a node's memory monitor kills
  // workers whose tasks are retried first. Older senders omit it (0: not retried).
  int max_retries = 0;
  MSGPACK_DEFINE(request_id, lease_id, reply_to, resources, label_selector, placement_group,
                 bundle_index, infeasible_timeout_s, job_id, argv, strategy, affinity_node,
                 affinity_soft, binary_hash, arch, max_retries);
};

struct LeaseReplyMsg {
  uint64_t request_id = 0;
  std::string lease_id;
  bool ok = true;
  std::string error_kind;
  std::string message;
  std::string worker_address;
  std::string worker_id;
  std::string node_id;
  MSGPACK_DEFINE(request_id, lease_id, ok, error_kind, message, worker_address, worker_id, node_id);
};

struct ReturnLeaseMsg {
  std::string lease_id;
  bool worker_failed = false;
  MSGPACK_DEFINE(lease_id, worker_failed);
};

struct PlacementGroupMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  std::string pg_id;
  std::string name;
  std::vector<std::map<std::string, double>> bundles;
  int strategy = 0;
  std::string same_label;
  std::map<std::string, std::string> label_selector;
  double timeout_s = 0;  // kWaitPlacementGroup
  MSGPACK_DEFINE(request_id, reply_to, pg_id, name, bundles, strategy, same_label, label_selector,
                 timeout_s);
};

struct PlacementGroupReplyMsg {
  uint64_t request_id = 0;
  bool ok = true;
  std::string error_kind;
  std::string message;
  bool ready = false;
  std::string pg_id;
  std::vector<std::map<std::string, double>> bundles;
  int strategy = 0;
  std::string name;
  MSGPACK_DEFINE(request_id, ok, error_kind, message, ready, pg_id, bundles, strategy, name);
};

struct NodeInfoMsg {
  std::string node_id;
  std::string address;
  bool alive = true;
  std::map<std::string, double> total;
  std::map<std::string, double> available;
  std::map<std::string, std::string> labels;
  // The node's memory monitor: memory in use and the limit that applies (host or cgroup),
  // in bytes, and the fraction above which it kills workers. 0 from older senders or when
  // the node cannot read its memory.
  int64_t memory_used_bytes = 0;
  int64_t memory_total_bytes = 0;
  double memory_usage_threshold = 0;
  MSGPACK_DEFINE(node_id, address, alive, total, available, labels, memory_used_bytes,
                 memory_total_bytes, memory_usage_threshold);
};

struct ClusterInfoMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  std::vector<NodeInfoMsg> nodes;
  MSGPACK_DEFINE(request_id, reply_to, nodes);
};

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
  kLeaseFailed = 3
};

struct WorkerEventMsg {
  int kind = 0;
  std::string node_id;
  std::string actor_id;
  std::string lease_id;
  int incarnation = 0;
  std::string address;
  int pid = 0;
  std::string error_kind;
  std::string cause;
  std::string node_secret;  // the sending node's (RegisterNodeMsg::node_secret)
  MSGPACK_DEFINE(kind, node_id, actor_id, lease_id, incarnation, address, pid, error_kind, cause,
                 node_secret);
};

struct ReleaseLeaseMsg {
  std::string lease_id;
  MSGPACK_DEFINE(lease_id);
};

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
  std::string error_kind;
  std::string error_type;
  std::string message;
  MSGPACK_DEFINE(worker_id, actor_id, ok, error_kind, error_type, message);
};

struct JobMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  std::string job_id;
  std::string driver_address;
  int pid = 0;
  std::string namespace_;
  std::string entrypoint;
  bool alive = true;
  std::string binary_hash;  // cluster mode: the head asks for the binary when it lacks it
  std::string arch;
  MSGPACK_DEFINE(request_id, reply_to, job_id, driver_address, pid, namespace_, entrypoint, alive,
                 binary_hash, arch);
};

// A record a driver asks the head to keep in the state store: the training module's run
// records (table "train_runs") and, when stream_index >= 0, one entry of the run's metrics
// stream. Resends are harmless: the head appends a stream entry once per index.
struct RecordMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  std::string table;
  std::string key;
  std::string json;  // the record; empty: keep the current one
  int64_t stream_index = -1;
  std::string stream_json;  // the stream entry's fields, a JSON object of strings
  MSGPACK_DEFINE(request_id, reply_to, table, key, json, stream_index, stream_json);
};

// An executable named by its SHA-256 (64 lowercase hex). PutBinary: a driver uploads the
// executable its job registered (job_id). FetchBinary: a node asks whether the head vouches
// for `hash` (a job registered it) and, with want_bytes, for its content; the reply echoes
// the node's request_id, an unguessable nonce, so that no other peer can answer for the head.
struct BinaryMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  std::string hash;
  std::string arch;
  bool ok = true;
  std::string message;
  std::string job_id;
  bool want_bytes = true;
  MSGPACK_DEFINE(request_id, reply_to, hash, arch, ok, message, job_id, want_bytes);
};

struct PingMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  MSGPACK_DEFINE(request_id, reply_to);
};

}  // namespace orrery::proto
