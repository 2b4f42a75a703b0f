#include "actors/src/task_table.h"

#include "core/src/clock.h"
#include "core/src/error_kind.h"

namespace orrery::runtime {

void TaskTable::Submitted(const ObjectId& result, const std::string& name, const ActorId* actor) {
  proto::TaskInfoMsg t;
  t.task_id = result.Hex();
  t.name = name;
  t.kind = actor ? "actor_call" : "task";
  if (actor) t.actor_id = actor->Hex();
  t.state = "PENDING";
  t.submit_time = WallSeconds();
  MutexLock lock(&mu_);
  if (order_.size() >= kCapacity) {
    tasks_.erase(order_.front());
    order_.pop_front();
    evicted_ = true;
  }
  std::string key = result.Binary();
  if (tasks_.emplace(key, std::move(t)).second) order_.push_back(key);
}

void TaskTable::Resolved(const ObjectId& result, const ObjectValue& value) {
  MutexLock lock(&mu_);
  auto it = tasks_.find(result.Binary());
  if (it == tasks_.end() || it->second.state != "PENDING") return;
  proto::TaskInfoMsg& t = it->second;
  t.end_time = WallSeconds();
  if (value.ok()) {
    t.state = "FINISHED";
  } else {
    proto::ErrorKind kind = value.error ? value.error->kind : proto::ErrorKind::kError;
    t.state = kind == proto::ErrorKind::kTaskCancelledError ? "CANCELLED" : "FAILED";
    t.error = proto::ErrorKindName(kind);
  }
}

proto::ListTasksReplyMsg TaskTable::List() const {
  proto::ListTasksReplyMsg reply;
  MutexLock lock(&mu_);
  reply.truncated = evicted_;
  reply.tasks.reserve(order_.size());
  for (const auto& key : order_) reply.tasks.push_back(tasks_.at(key));
  return reply;
}

}  // namespace orrery::runtime
