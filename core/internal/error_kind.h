// The kinds of error that travel on the wire (an enum, one byte), and the one place where a
// kind becomes its orrery::Error subclass (VisitError). Records in Redis and logs name a
// kind by ErrorKindName. docs/protocol.md "Error kinds".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "orrery/api/serialize.h"
#include "orrery/errors.h"

namespace orrery::proto {

// X(Name, value): the kinds users can catch (orrery::Error subclasses), then the kinds the
// protocol uses between daemons, which reach users as one of the former.
#define ORRERY_ERROR_KINDS(X)                                                      \
  X(None, 0) /* no error */                                                        \
  X(Error, 1)                                                                      \
  X(RemoteError, 2)                                                                \
  X(ActorDiedError, 3)                                                             \
  X(GetTimeoutError, 4)                                                            \
  X(InfeasibleError, 5)                                                            \
  X(PlacementGroupError, 6)                                                        \
  X(FunctionNotFoundError, 7)                                                      \
  X(ConfigError, 8)                                                                \
  X(ConnectionError, 9)                                                            \
  X(AcceleratorNotAvailableError, 10)                                              \
  X(TrainingFailedError, 11)                                                       \
  X(OutOfMemoryError, 12)                                                          \
  X(WorkerCrashedError, 13)                                                        \
  X(ObjectLostError, 14)                                                           \
  X(ObjectStoreFullError, 15)                                                      \
  X(TaskCancelledError, 16)                                                        \
  X(PendingCallsLimitExceededError, 17)                                            \
  X(NeedBinary, 32)     /* head -> driver: upload the job's executable first */    \
  X(WorkerDied, 33)     /* a lease's worker or node died: the tasks are retried */ \
  X(CreationFailed, 34) /* node -> head: the actor's constructor failed: no restart */

enum class ErrorKind : uint8_t {
#define ORRERY_ERROR_ENUM(name, value) k##name = value,
  ORRERY_ERROR_KINDS(ORRERY_ERROR_ENUM)
#undef ORRERY_ERROR_ENUM
};

// "ActorDiedError"; "" for kNone; "Error" for a value no kind has (a peer's bytes).
const char* ErrorKindName(ErrorKind kind);
// The kind of that name; kError for a name no kind has, kNone for "".
ErrorKind ErrorKindFromName(std::string_view name);

// Calls `visit` with an exception of the orrery::Error subclass of `kind` (orrery::Error for
// kinds users cannot catch as such), carrying `message`: the one map from kinds to types.
template <typename Visit>
void VisitError(ErrorKind kind, const std::string& message, Visit&& visit) {
  switch (kind) {
#define ORRERY_ERROR_VISIT(name) \
  case ErrorKind::k##name:       \
    return visit(name(message));
    ORRERY_ERROR_VISIT(ActorDiedError)
    ORRERY_ERROR_VISIT(GetTimeoutError)
    ORRERY_ERROR_VISIT(InfeasibleError)
    ORRERY_ERROR_VISIT(PlacementGroupError)
    ORRERY_ERROR_VISIT(FunctionNotFoundError)
    ORRERY_ERROR_VISIT(ConfigError)
    ORRERY_ERROR_VISIT(ConnectionError)
    ORRERY_ERROR_VISIT(AcceleratorNotAvailableError)
    ORRERY_ERROR_VISIT(TrainingFailedError)
    ORRERY_ERROR_VISIT(OutOfMemoryError)
    ORRERY_ERROR_VISIT(WorkerCrashedError)
    ORRERY_ERROR_VISIT(ObjectLostError)
    ORRERY_ERROR_VISIT(ObjectStoreFullError)
    ORRERY_ERROR_VISIT(TaskCancelledError)
    ORRERY_ERROR_VISIT(PendingCallsLimitExceededError)
#undef ORRERY_ERROR_VISIT
    case ErrorKind::kRemoteError:
      return visit(RemoteError("", message, "", ""));
    default:
      return visit(Error(message));
  }
}

// Throws the orrery::Error subclass of `kind` with `message`.
[[noreturn]] void ThrowErrorOfKind(ErrorKind kind, const std::string& message);

}  // namespace orrery::proto

MSGPACK_ADD_ENUM(orrery::proto::ErrorKind);
