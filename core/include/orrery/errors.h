// The exception family that the public API throws (docs/api.md "Errors").
//
// Internally Orrery returns Status/Result; exceptions appear only at the public edge.
// Every error a user can catch derives from orrery::Error.
#pragma once

#include <stdexcept>
#include <string>

namespace orrery {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  // A short name for the kind of error, e.g. "RemoteError".
  virtual const char* kind() const noexcept { return "Error"; }
};

#define ORRERY_DECLARE_ERROR(Name)                                \
  class Name : public Error {                                     \
   public:                                                        \
    explicit Name(const std::string& message) : Error(message) {} \
    const char* kind() const noexcept override { return #Name; }  \
  }

ORRERY_DECLARE_ERROR(ActorDiedError);
ORRERY_DECLARE_ERROR(GetTimeoutError);
ORRERY_DECLARE_ERROR(InfeasibleError);
ORRERY_DECLARE_ERROR(PlacementGroupError);
ORRERY_DECLARE_ERROR(FunctionNotFoundError);
ORRERY_DECLARE_ERROR(ConfigError);
ORRERY_DECLARE_ERROR(ConnectionError);
ORRERY_DECLARE_ERROR(AcceleratorNotAvailableError);
ORRERY_DECLARE_ERROR(TrainingFailedError);
// A node's memory monitor killed the worker running the call or task: the node's memory
// in use was above its memory_usage_threshold. The message names the node, the memory in
// use and the threshold.
ORRERY_DECLARE_ERROR(OutOfMemoryError);
// The worker process running a task died (it crashed, was killed, or its node died) and the
// task had no retries left (SetMaxRetries). As Ray's WorkerCrashedError.
ORRERY_DECLARE_ERROR(WorkerCrashedError);
// Every copy of an object is gone (its node died, or died while the object was being pulled
// from it) and no other copy could be read. The message names the object and why.
ORRERY_DECLARE_ERROR(ObjectLostError);
// A value could not be stored: the node's object store (object_store_memory) cannot hold it
// even after spilling what is not in use. The message names the sizes.
ORRERY_DECLARE_ERROR(ObjectStoreFullError);
// The task or actor call was cancelled (orrery::Cancel) before it finished: Get of its result
// throws this. The message names the function.
ORRERY_DECLARE_ERROR(TaskCancelledError);
// Raised at submission (Remote) of an actor call when this process already has as many calls
// to that actor pending (queued or sent, not answered) as ActorCreator::SetMaxPendingCalls
// allows (by default: as many as fit the pending-call memory budget). The call was not
// submitted; nothing hangs. As Ray's PendingCallsLimitExceededError.
ORRERY_DECLARE_ERROR(PendingCallsLimitExceededError);

#undef ORRERY_DECLARE_ERROR

// User code threw. Carries the original exception's type name and message, what was
// running (function or actor method) and where (node and process).
class RemoteError : public Error {
 public:
  RemoteError(std::string type, std::string message, std::string function, std::string where);
  const char* kind() const noexcept override { return "RemoteError"; }
  const std::string& type() const { return type_; }
  const std::string& message() const { return message_; }
  const std::string& function() const { return function_; }
  const std::string& where() const { return where_; }

 private:
  std::string type_;
  std::string message_;
  std::string function_;
  std::string where_;
};

}  // namespace orrery
