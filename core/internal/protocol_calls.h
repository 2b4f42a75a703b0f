// Calls: any process -> a worker (an actor method or a task), the worker's reply, and object
// fetches from an object's owner (docs/protocol.md "Calls").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/internal/protocol_objects.h"
#include "core/internal/protocol_wire.h"

namespace orrery::proto {

struct CallMsg {
  uint64_t request_id = 0;
  std::string object_id;  // id of the return object
  std::string reply_to;   // caller's inbox address
  std::string actor_id;   // empty: a task
  uint64_t seq = 0;       // per (caller, actor incarnation) order
  std::string function;   // registered name
  std::string lease_id;   // tasks: the lease it runs under
  // Actor calls: the caller waits for no reply below this sequence number (each was answered,
  // or reported lost): a worker that has forgotten this caller starts again from here
  // (docs/protocol.md "Call order without gaps"). Appended last: a call without it decodes as 0.
  uint64_t first_pending = 0;
  MSGPACK_DEFINE(request_id, object_id, reply_to, actor_id, seq, function, lease_id, first_pending);
};

// A caller -> an actor's worker (kCallsSent, to its call address), every few seconds while
// calls to it are unanswered: every number below end_seq was handed to the transport. A
// worker that has not had them all starts timing the gap (docs/protocol.md "Call order without
// gaps").
struct CallsSentMsg {
  std::string actor_id;
  std::string reply_to;  // the caller, as its calls name it
  uint64_t end_seq = 0;
  uint64_t first_pending = 0;  // as in CallMsg: it waits for no reply below this
  MSGPACK_DEFINE(actor_id, reply_to, end_seq, first_pending);
};

// An actor's worker -> a caller (kCallsLost): the caller's calls [first_seq, end_seq) to this
// incarnation never arrived (the transport dropped them after they were handed over) and
// the worker stopped waiting for them after its gap timeout; they did not run. The caller
// fails those it still waits for with ConnectionError (docs/protocol.md "Call order without gaps").
struct CallsLostMsg {
  std::string actor_id;
  std::string call_address;  // the worker's: a caller ignores a report of an older incarnation
  uint64_t first_seq = 0;
  uint64_t end_seq = 0;
  std::string message;
  MSGPACK_DEFINE(actor_id, call_address, first_seq, end_seq, message);
};

// A ref packed inside a value (docs/objects.md "Lifetime"): whoever keeps the value keeps
// the ref, so that its object outlives the value.
struct ContainedRefMsg {
  std::string object_id;
  std::string owner;  // the inbox of the process that owns the object
  MSGPACK_DEFINE(object_id, owner);
};
// At most this many refs are named in one reply; a result holding more keeps the rest in the
// worker for as long as it lives.
inline constexpr size_t kMaxContainedRefs = 100000;

struct ReplyMsg {
  std::string object_id;
  bool ok = true;
  ErrorKind error_kind = ErrorKind::kNone;  // kRemoteError, kFunctionNotFoundError, ...
  std::string error_type;                   // RemoteError: the C++ type of the user's exception
  std::string message;
  std::string function;
  std::string where;     // node and pid
  std::string actor_id;  // echoed from the call
  uint64_t seq = 0;
  std::string lease_id;
  // Set when the value was kept in a node's store (no payload then): where to read it.
  ObjectLocationMsg location;
  // The refs packed inside the result: the caller keeps them for as long as it keeps the
  // result (appended last: a reply without it decodes as an empty list).
  std::vector<ContainedRefMsg> contained;
  MSGPACK_DEFINE(object_id, ok, error_kind, error_type, message, function, where, actor_id, seq,
                 lease_id, location, contained);
};

struct GetObjectMsg {
  std::string object_id;
  std::string reply_to;
  MSGPACK_DEFINE(object_id, reply_to);
};

// A process that is not an object's owner started (+1) or stopped (-1) holding refs to it
// (kBorrow, to the owner): the owner keeps the object while any borrower holds a ref.
struct BorrowMsg {
  std::string object_id;
  std::string borrower;  // the borrowing process's inbox
  int32_t delta = 0;     // +1 or -1
  MSGPACK_DEFINE(object_id, borrower, delta);
};

// The caller of a call cancels it (orrery::Cancel), to the worker's control address (its
// runtime's inbox, which a running call does not block): a call not started yet is answered
// with kTaskCancelledError instead of running; a running one sees the flag
// (RuntimeContext::IsCancelled); with `force`, a task's worker exits while it runs it.
struct CancelMsg {
  std::string object_id;  // the call's return object
  bool force = false;
  MSGPACK_DEFINE(object_id, force);
};

// A streaming call's worker -> its caller (kStreamItem, to the call's reply_to): value number
// `index` of the call's stream (docs/api.md "Streaming results"), inline in the payload or,
// with `location` set, kept in a node's store; the caller owns it. Items of one call come
// before its kCallReply (both from the thread that runs the call), whose result is the number
// of items. A retried call sends its items again: the caller keeps the first of each index.
struct StreamItemMsg {
  std::string call_id;  // the call's return object
  uint64_t index = 0;
  std::string object_id;  // the item's object (random, chosen by the worker)
  std::string ack_to;     // the worker's runtime inbox, where kStreamAck goes
  ObjectLocationMsg location;
  std::vector<ContainedRefMsg> contained;
  MSGPACK_DEFINE(call_id, index, object_id, ack_to, location, contained);
};

// A streaming call's caller -> its worker (kStreamAck, to StreamItemMsg::ack_to): the caller
// has read `consumed` items, so the worker may run up to kStreamWindow items ahead of that;
// `closed`: the caller dropped the stream, so the worker stops producing.
struct StreamAckMsg {
  std::string call_id;
  uint64_t consumed = 0;
  bool closed = false;
  MSGPACK_DEFINE(call_id, consumed, closed);
};

}  // namespace orrery::proto
