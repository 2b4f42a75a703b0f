#include "actors/src/task_table.h"

#include "core/internal/clock.h"
#include "core/internal/error_kind.h"

namespace orrery::runtime {

// The ring grows as tasks are submitted: its full size is nearly 1 MB, and every worker
// process has a table, so a fresh worker would otherwise fault all of it in at start.
TaskTable::TaskTable() = default;

void TaskTable::Submitted(const ObjectId& result, const std::string& name, const ActorId* actor) {
  double now = WallSeconds();
  MutexLock lock(&mu_);
  size_t slot;
  if (count_ < kCapacity) {
    slot = (first_ + count_++) % kCapacity;  // first_ is 0 until the ring is full
    if (slot == ring_.size()) ring_.emplace_back();
  } else {  // the oldest goes
    slot = first_;
    first_ = (first_ + 1) % kCapacity;
    if (ring_[slot].state == State::kPending) pending_.erase(ring_[slot].id);
    evicted_ = true;
  }
  Entry& e = ring_[slot];
  e.id = result;
  e.actor = actor ? *actor : ActorId();
  e.name = name;
  e.state = State::kPending;
  e.error = proto::ErrorKind::kNone;
  e.submit_time = now;
  e.end_time = 0;
  pending_[result] = slot;
}

void TaskTable::Resolved(const ObjectId& result, const ObjectValue& value) {
  double now = WallSeconds();
  MutexLock lock(&mu_);
  auto it = pending_.find(result);
  if (it == pending_.end()) return;
  Entry& e = ring_[it->second];
  pending_.erase(it);
  e.end_time = now;
  if (value.ok()) {
    e.state = State::kFinished;
    return;
  }
  e.error = value.error ? value.error->kind : proto::ErrorKind::kError;
  e.state = e.error == proto::ErrorKind::kTaskCancelledError ? State::kCancelled : State::kFailed;
}

proto::ListTasksReplyMsg TaskTable::List() const {
  static const char* kStates[] = {"PENDING", "FINISHED", "FAILED", "CANCELLED"};
  proto::ListTasksReplyMsg reply;
  MutexLock lock(&mu_);
  reply.truncated = evicted_;
  reply.tasks.reserve(count_);
  for (size_t i = 0; i < count_; ++i) {
    const Entry& e = ring_[(first_ + i) % kCapacity];
    proto::TaskInfoMsg t;
    t.task_id = e.id.Hex();
    t.name = e.name;
    t.kind = e.actor.IsNil() ? "task" : "actor_call";
    if (!e.actor.IsNil()) t.actor_id = e.actor.Hex();
    t.state = kStates[int(e.state)];
    if (e.state == State::kFailed || e.state == State::kCancelled)
      t.error = proto::ErrorKindName(e.error);
    t.submit_time = e.submit_time;
    t.end_time = e.end_time;
    reply.tasks.push_back(std::move(t));
  }
  return reply;
}

}  // namespace orrery::runtime
