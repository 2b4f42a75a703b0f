// The process-local object store: values (msgpack bytes) and errors of the objects this
// process owns or has fetched, keyed by ObjectId.
//
// Waits block the calling thread; inside a worker they first tell the executor (through the
// block hooks) so the actor keeps serving while one of its methods waits.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/src/error_kind.h"
#include "core/src/thread_annotations.h"
#include "orrery/ids.h"
#include "orrery/status.h"

namespace orrery::runtime {

struct ObjectError {
  proto::ErrorKind kind = proto::ErrorKind::kError;  // kRemoteError, kActorDiedError, ...
  std::string type;                                  // RemoteError: the user's exception type
  std::string message;
  std::string function;
  std::string where;
};

struct ObjectValue {
  std::shared_ptr<const std::string> bytes;  // set when ok
  std::shared_ptr<const ObjectError> error;  // set on failure
};

class ObjectStore {
 public:
  using Callback = std::function<void(const ObjectValue&)>;

  // While one is alive on a thread, the ready callbacks of the objects that thread completes
  // run when the last one ends instead of at once. A submitter declares one before it takes
  // its own lock to fail calls: a dependent call's callback takes that same lock, so it must
  // run after the lock is released (docs/architecture.md "Locks and their order").
  class DeferCallbacks {
   public:
    DeferCallbacks();
    ~DeferCallbacks();
    DeferCallbacks(const DeferCallbacks&) = delete;
    DeferCallbacks& operator=(const DeferCallbacks&) = delete;
  };

  // Marks `id` as expected (a call's return value, a fetch in flight). Returns false when the
  // object already had a state other than "referenced only".
  bool MarkPending(const ObjectId& id) EXCLUDES(mu_);
  void PutValue(const ObjectId& id, std::shared_ptr<const std::string> bytes) EXCLUDES(mu_);
  void PutError(const ObjectId& id, ObjectError error) EXCLUDES(mu_);

  enum class Presence { kAbsent, kReferenced, kPending, kReady };
  Presence Lookup(const ObjectId& id) EXCLUDES(mu_);

  // Waits for the value. Timeout (timeout_ms >= 0 elapsed) or NotFound (nobody will produce
  // it) as Status.
  Result<ObjectValue> Get(const ObjectId& id, int timeout_ms) EXCLUDES(mu_);
  // Which of `ids` are ready once `num_returns` are, or at the timeout.
  std::vector<bool> Wait(const std::vector<ObjectId>& ids, int num_returns, int timeout_ms)
      EXCLUDES(mu_);
  // Runs `cb` once the object is ready: at once (on this thread) if it is, else on the
  // thread that completes it.
  // The callback runs without the store's lock, so it may call back into the store.
  void OnReady(const ObjectId& id, Callback cb) EXCLUDES(mu_);

  // Local reference counting by ObjectRef holders; the entry goes when the count drops to
  // zero unless it was shared with other processes.
  void AddRef(const ObjectId& id) EXCLUDES(mu_);
  void RemoveRef(const ObjectId& id) EXCLUDES(mu_);
  void Pin(const ObjectId& id) EXCLUDES(mu_);
  size_t Size() EXCLUDES(mu_);

  // Hooks called around a blocking wait, so an executor can free the caller's slot.
  static void SetBlockHooks(void (*before)(), void (*after)());

 private:
  struct Entry {
    enum State { kReferenced, kPending, kReady } state = kReferenced;
    ObjectValue value;
    int refs = 0;
    bool pinned = false;
    std::vector<Callback> callbacks;
  };
  void Complete(const ObjectId& id, ObjectValue value) EXCLUDES(mu_);
  // Whether a Get of `id` need not wait: it is ready, or nobody holds it (NotFound).
  bool DoneLocked(const ObjectId& id) REQUIRES(mu_);
  // What a Get of `id` returns once DoneLocked.
  Result<ObjectValue> ValueLocked(const ObjectId& id) REQUIRES(mu_);
  // Sets (*ready)[i] to whether ids[i] is ready; true when num_returns of them are.
  bool CountReadyLocked(const std::vector<ObjectId>& ids, int num_returns, std::vector<bool>* ready)
      REQUIRES(mu_);

  Mutex mu_;
  CondVar cv_;
  std::unordered_map<ObjectId, Entry, IdHash> entries_ GUARDED_BY(mu_);
};

}  // namespace orrery::runtime
