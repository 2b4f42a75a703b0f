// What a process knows of the tasks and actor calls it submitted, for `orrery list tasks`
// (docs/cli.md): the newest kCapacity of them, each with its function, state and times.
// The owner's view: PENDING until its result (or error) arrives, then FINISHED, FAILED or
// CANCELLED.
//
// It is on every call's path, so it stays cheap there: a ring of fixed entries and a hash
// index of the pending ones only; text is made when someone lists.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "actors/src/object_store.h"
#include "core/internal/protocol_ops.h"
#include "core/internal/thread_annotations.h"
#include "orrery/ids.h"

namespace orrery::runtime {

class TaskTable {
 public:
  static constexpr size_t kCapacity = proto::kMaxListedTasks;

  TaskTable();
  void Submitted(const ObjectId& result, const std::string& name, const ActorId* actor)
      EXCLUDES(mu_);
  // Ignores objects that are no pending task of this table (a Put, or one evicted).
  void Resolved(const ObjectId& result, const ObjectValue& value) EXCLUDES(mu_);
  proto::ListTasksReplyMsg List() const EXCLUDES(mu_);

 private:
  enum class State : uint8_t { kPending, kFinished, kFailed, kCancelled };
  struct Entry {
    ObjectId id;
    ActorId actor;  // nil for a task
    std::string name;
    State state = State::kPending;
    proto::ErrorKind error = proto::ErrorKind::kNone;
    double submit_time = 0, end_time = 0;
  };
  struct IdHash {
    size_t operator()(const ObjectId& id) const { return id.Hash(); }
  };

  mutable Mutex mu_;
  std::vector<Entry> ring_ GUARDED_BY(mu_);  // up to kCapacity slots, oldest at first_
  size_t first_ GUARDED_BY(mu_) = 0;
  size_t count_ GUARDED_BY(mu_) = 0;
  std::unordered_map<ObjectId, size_t, IdHash> pending_ GUARDED_BY(mu_);  // id -> slot
  bool evicted_ GUARDED_BY(mu_) = false;
};

}  // namespace orrery::runtime
