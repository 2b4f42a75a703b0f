// What the client runtime's pieces share (docs/architecture.md "Client runtime"): a call
// waiting to be sent, and who this process is as its submissions name it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/src/object_store.h"
#include "core/internal/outbox.h"
#include "core/internal/protocol.h"
#include "orrery/api/runtime_api.h"
#include "orrery/ids.h"
#include "orrery/status.h"

namespace orrery::runtime {

// A call waiting to be sent: its return object, function and arguments.
struct PendingCall {
  ObjectId return_id;
  std::string function;
  std::vector<internal::ArgSlot> slots;
  std::string args;  // packed msgpack array, once every slot is resolved
  // The refs among the arguments, held until the call is done: a store-kept value passed by
  // reference must outlive the worker's read of it.
  std::vector<std::shared_ptr<internal::RefHolder>> arg_refs;
  int unresolved = 0;          // dependencies not yet ready
  uint64_t pending_bytes = 0;  // what it counts against its actor's pending-call budget
  int retries_left = 0;
  uint64_t seq = 0;
  std::shared_ptr<const ObjectError> dep_error;
  // Cancelled by its caller (orrery::Cancel): never sent, retried or resent any more; its
  // result is TaskCancelledError already.
  std::atomic<bool> cancelled{false};
};

// Who this process is, as its submissions name it. The Runtime writes it before its inbox
// starts (the address, a worker's executable hash) and a driver's JobRegistration before
// Init returns (the executable's hash and arch), so before the first submission: read-only
// afterwards, read without a lock.
struct ProcessIdentity {
  std::string address;  // this process's inbox: where replies come back
  JobId job;
  std::string where;              // names this process in error messages
  std::vector<std::string> argv;  // what workers of this process's actors and tasks run
  std::string binary_hash;        // cluster mode: content hash of argv[0]
  std::string arch;
  // Tasks and actor calls this process submitted (the submitters count them; the driver's
  // heartbeat and a worker's stats report them, docs/metrics.md). Any thread.
  mutable std::atomic<uint64_t> submitted{0};
};

// The pieces send through orrery::Outbox (core/internal/outbox.h).
using ::orrery::Outbox;
using ::orrery::TransportOutbox;

// Stores `error` as the call's result.
inline void FailCall(ObjectStore& store, const PendingCall& call, const ObjectError& error) {
  store.PutError(call.return_id, error);
}

}  // namespace orrery::runtime
