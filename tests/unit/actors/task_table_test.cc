// TaskTable: what `orrery list tasks` shows of a process's own submissions.
#include "actors/src/task_table.h"

#include <gtest/gtest.h>

#include <memory>

namespace orrery::runtime {
namespace {

ObjectValue Ok() { return ObjectValue{std::make_shared<const std::string>("x"), nullptr, nullptr}; }
ObjectValue Err(proto::ErrorKind kind) {
  auto e = std::make_shared<ObjectError>();
  e->kind = kind;
  return ObjectValue{nullptr, nullptr, e};
}

TEST(TaskTableTest, TasksEndAsTheirResultsArrive) {
  TaskTable t;
  ObjectId a = ObjectId::Random(), b = ObjectId::Random(), c = ObjectId::Random();
  ActorId actor = ActorId::Random();
  t.Submitted(a, "Add", nullptr);
  t.Submitted(b, "Counter::Inc", &actor);
  t.Submitted(c, "Slow", nullptr);
  t.Resolved(a, Ok());
  t.Resolved(b, Err(proto::ErrorKind::kRemoteError));
  t.Resolved(ObjectId::Random(), Ok());                // a Put: not a task, ignored
  t.Resolved(a, Err(proto::ErrorKind::kRemoteError));  // a second answer changes nothing
  auto list = t.List();
  ASSERT_EQ(list.tasks.size(), 3u);
  EXPECT_FALSE(list.truncated);
  EXPECT_EQ(list.tasks[0].task_id, a.Hex());
  EXPECT_EQ(list.tasks[0].state, "FINISHED");
  EXPECT_EQ(list.tasks[0].kind, "task");
  EXPECT_GT(list.tasks[0].end_time, 0);
  EXPECT_EQ(list.tasks[1].state, "FAILED");
  EXPECT_EQ(list.tasks[1].error, "RemoteError");
  EXPECT_EQ(list.tasks[1].kind, "actor_call");
  EXPECT_EQ(list.tasks[1].actor_id, actor.Hex());
  EXPECT_EQ(list.tasks[2].state, "PENDING");
  EXPECT_EQ(list.tasks[2].end_time, 0);
  t.Resolved(c, Err(proto::ErrorKind::kTaskCancelledError));
  EXPECT_EQ(t.List().tasks[2].state, "CANCELLED");
}

TEST(TaskTableTest, OnlyTheNewestAreKept) {
  TaskTable t;
  ObjectId first = ObjectId::Random();
  t.Submitted(first, "f", nullptr);
  ObjectId last;
  for (size_t i = 0; i < TaskTable::kCapacity; ++i) {
    last = ObjectId::Random();
    t.Submitted(last, "g", nullptr);
  }
  t.Resolved(first, Ok());  // evicted: nothing to update
  t.Resolved(last, Ok());
  auto list = t.List();
  EXPECT_TRUE(list.truncated);
  ASSERT_EQ(list.tasks.size(), TaskTable::kCapacity);
  EXPECT_EQ(list.tasks.front().name, "g");
  EXPECT_EQ(list.tasks.back().task_id, last.Hex());
  EXPECT_EQ(list.tasks.back().state, "FINISHED");
}

}  // namespace
}  // namespace orrery::runtime
