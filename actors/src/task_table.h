// What a process knows of the tasks and actor calls it submitted, for `orrery list tasks`
// (docs/cli.md): the newest kCapacity of them, each with its function, state and times.
// The owner's view: PENDING until its result (or error) arrives, then FINISHED, FAILED or
// CANCELLED.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <deque>
#include <map>
#include <string>

#include "actors/src/object_store.h"
#include "core/src/protocol_ops.h"
#include "core/src/thread_annotations.h"
#include "orrery/ids.h"

namespace orrery::runtime {

class TaskTable {
 public:
  static constexpr size_t kCapacity = proto::kMaxListedTasks;

  void Submitted(const ObjectId& result, const std::string& name, const ActorId* actor)
      EXCLUDES(mu_);
  // Ignores objects that are no task of this table (a Put, or one evicted).
  void Resolved(const ObjectId& result, const ObjectValue& value) EXCLUDES(mu_);
  proto::ListTasksReplyMsg List() const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::deque<std::string> order_ GUARDED_BY(mu_);  // binary result ids, oldest first
  std::map<std::string, proto::TaskInfoMsg> tasks_ GUARDED_BY(mu_);
  bool evicted_ GUARDED_BY(mu_) = false;
};

}  // namespace orrery::runtime
