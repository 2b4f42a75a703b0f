// The wire protocol's framing, shared by every service (docs/protocol.md): the message type
// table, frame 0's header, encoding and decoding, and the generic replies. Each service's
// messages are in its own header (protocol_calls.h, protocol_head.h, protocol_node.h,
// protocol_worker.h); protocol.h includes them all.
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
#include <optional>
#include <string>
#include <string_view>

#include "core/internal/error_kind.h"
#include "orrery/api/serialize.h"
#include "orrery/status.h"

namespace orrery::proto {

inline constexpr uint8_t kMagic0 = 'O';
inline constexpr uint8_t kMagic1 = 'R';
// 2: error kinds travel as ErrorKind (one byte) instead of their names.
// 3: the object plane (protocol_objects.h): values in node stores travel as locations.
inline constexpr uint8_t kProtocolVersion = 3;
inline constexpr size_t kHeaderSize = 4;

// The one table of message types: ORRERY_MESSAGE_TYPES(X) calls X(Name, value) for each,
// grouped by service. The MsgType enum, IsKnownType and TypeName are generated from it: a new
// type is added here and nowhere else (its meta struct goes in the header of its service).
#define ORRERY_MESSAGE_TYPES(X)                                                             \
  X(Error, 1) /* reply to a malformed or unknown message: ErrorMsg */                       \
  /* Calls, between any process and a worker. */                                            \
  X(Call, 10)        /* CallMsg + payload (args array) */                                   \
  X(CallReply, 11)   /* ReplyMsg + payload (result) */                                      \
  X(GetObject, 12)   /* GetObjectMsg: ask an owner for an object's value */                 \
  X(ObjectReply, 13) /* ReplyMsg + payload */                                               \
  X(Borrow, 14)      /* BorrowMsg: a borrower -> an object's owner */                       \
  X(Cancel, 15)      /* CancelMsg: a caller -> the worker of its call (control address) */  \
  X(CallsLost, 16)   /* CallsLostMsg: an actor's worker -> a caller: calls never arrived */ \
  X(CallsSent, 17)   /* CallsSentMsg: a caller -> an actor's worker: how far it has sent */ \
  X(StreamItem, 18)  /* StreamItemMsg + payload: a streaming call's worker -> its caller */ \
  X(StreamAck, 19)   /* StreamAckMsg: a streaming call's caller -> its worker */            \
  /* Driver/worker -> head. */                                                              \
  X(CreateActor, 20)                                                                        \
  X(CreateActorReply, 21)                                                                   \
  X(SubscribeActor, 22)                                                                     \
  X(ActorUpdate, 23) /* head -> subscribers */                                              \
  X(GetNamedActor, 24)                                                                      \
  X(GetNamedActorReply, 25)                                                                 \
  X(KillActor, 26)                                                                          \
  X(RequestLease, 27)                                                                       \
  X(LeaseReply, 28) /* node or head -> requester */                                         \
  X(ReturnLease, 29)                                                                        \
  X(CreatePlacementGroup, 30)                                                               \
  X(PlacementGroupReply, 31)                                                                \
  X(RemovePlacementGroup, 32)                                                               \
  X(WaitPlacementGroup, 33)                                                                 \
  X(GetClusterInfo, 34)                                                                     \
  X(ClusterInfoReply, 35)                                                                   \
  X(Ack, 36)         /* generic reply: AckMsg */                                            \
  X(RegisterJob, 37) /* driver -> head, also its heartbeat: JobMsg */                       \
  X(PutBinary, 38)   /* driver -> head: BinaryMsg + payload (the driver's executable) */    \
  X(FetchBinary, 39) /* node -> head: BinaryMsg */                                          \
  X(BinaryReply, 46) /* head -> node: BinaryMsg + payload */                                \
  X(PutRecord, 47)   /* driver -> head: RecordMsg (a training run's record and metrics) */  \
  /* Node <-> head. */                                                                      \
  X(RegisterNode, 40)                                                                       \
  X(StartActor, 41)   /* head -> node */                                                    \
  X(GrantLease, 42)   /* head -> node */                                                    \
  X(KillWorker, 43)   /* head -> node */                                                    \
  X(WorkerEvent, 44)  /* node -> head: actor alive, actor/lease worker exited */            \
  X(ReleaseLease, 45) /* head -> node: the lease's worker is idle again */                  \
  /* Worker <-> node. */                                                                    \
  X(WorkerRegister, 50)                                                                     \
  X(Assign, 51)      /* node -> worker: become this actor / serve leases */                 \
  X(AssignReply, 52) /* worker -> node */                                                   \
  X(Exit, 53)        /* node -> worker: exit now */                                         \
  X(WorkerStats, 54) /* worker -> node: WorkerStatsMsg */                                   \
  /* Objects: a process <-> its node's store, node <-> node (protocol_objects.h). */        \
  X(ObjectCreate, 70)     /* ObjectStoreMsg -> kObjectStoreReply */                         \
  X(ObjectSeal, 71)       /* ObjectStoreMsg: the creator wrote the bytes */                 \
  X(ObjectOpen, 72)       /* ObjectStoreMsg -> kObjectStoreReply (pulls when absent) */     \
  X(ObjectRelease, 73)    /* ObjectStoreMsg: a reader is done with it */                    \
  X(ObjectFree, 74)       /* ObjectFreeMsg: the last reference is gone */                   \
  X(ObjectStoreReply, 75) /* ObjectStoreReplyMsg */                                         \
  X(ObjectCopied, 76)     /* ObjectCopiedMsg: node -> the primary's node */                 \
  X(ListObjects, 77)      /* ListObjectsMsg -> kListObjectsReply */                         \
  X(ListObjectsReply, 78) /* ListObjectsReplyMsg */                                         \
  /* Operating a cluster (protocol_ops.h). */                                               \
  X(SubmitJob, 80)        /* CLI -> head: SubmitJobMsg -> kSubmitJobReply */                \
  X(SubmitJobReply, 81)   /* SubmitJobReplyMsg */                                           \
  X(StartJob, 82)         /* head -> node: StartJobMsg */                                   \
  X(JobEvent, 83)         /* node -> head: JobEventMsg */                                   \
  X(StopJob, 84)          /* CLI -> head (-> kAck), head -> node: StopJobMsg */             \
  X(LogBatch, 85)         /* node -> head -> driver: LogBatchMsg */                         \
  X(ListWorkers, 86)      /* CLI -> node: ListWorkersMsg -> kListWorkersReply */            \
  X(ListWorkersReply, 87) /* ListWorkersReplyMsg */                                         \
  X(ListTasks, 88)        /* CLI -> driver: ListTasksMsg -> kListTasksReply */              \
  X(ListTasksReply, 89)   /* ListTasksReplyMsg */                                           \
  /* The autoscaler (protocol_autoscaler.h). */                                             \
  X(AutoscalerSync, 90)  /* autoscaler -> head: AutoscalerSyncMsg -> kAutoscalerState */    \
  X(AutoscalerState, 91) /* AutoscalerStateMsg */                                           \
  X(Ping, 60)                                                                               \
  X(Pong, 61)

enum class MsgType : uint8_t {
#define ORRERY_MSG_ENUM(name, value) k##name = value,
  ORRERY_MESSAGE_TYPES(ORRERY_MSG_ENUM)
#undef ORRERY_MSG_ENUM
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

// Validates magic, version and type. Never throws. A frame of another protocol version is
// Incompatible (both versions named); any other fault is InvalidArgument.
Result<Header> DecodeHeader(const void* data, size_t size);

// The version refusal: what a process answers, over the connection it came by, to a frame
// of another protocol version. Its layout is the same in every version, so that a peer of
// any version can read it: the 4-byte header {'O', 'R', <the refuser's protocol version>,
// kVersionRefusalType}, then the refuser's project version as text (at most 32 bytes).
inline constexpr uint8_t kVersionRefusalType = 0xFF;
inline constexpr size_t kMaxRefusalText = 32;
std::string EncodeVersionRefusal();
// The refusal in `data`, if it is one, as a status naming both sides' versions (`from`
// names the peer); std::nullopt for any other frame.
std::optional<Status> DecodeVersionRefusal(const void* data, size_t size, const std::string& from);

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
  ErrorKind error_kind = ErrorKind::kNone;  // when !ok
  std::string message;
  MSGPACK_DEFINE(request_id, ok, error_kind, message);
};

struct PingMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  MSGPACK_DEFINE(request_id, reply_to);
};

}  // namespace orrery::proto
