// The head's managers, built in dependency order and wired to each other: a HeadService
// owns one (over the transport), the managers' unit tests build one over a recording outbox
// (tests/unit/scheduler/head_harness.h). docs/architecture.md "The head".
#pragma once

#include <map>
#include <string>

#include "scheduler/src/actor_manager.h"
#include "scheduler/src/autoscaler_view.h"
#include "scheduler/src/driver_records.h"
#include "scheduler/src/head_context.h"
#include "scheduler/src/job_manager.h"
#include "scheduler/src/lease_manager.h"
#include "scheduler/src/node_manager.h"
#include "scheduler/src/placement_group_manager.h"
#include "scheduler/src/resource_book.h"
#include "scheduler/src/scheduling_queue.h"
#include "scheduler/src/submission_manager.h"

namespace orrery::scheduler {

// Every table the managers restore themselves from, read from `store` (an error when any
// cannot be read), for HeadManagers::Restore.
Result<std::map<std::string, TableRecords>> ReadTables(StateStore& store);

struct HeadManagers {
  // `binary_dir`: where drivers' executables are kept (JobManager).
  HeadManagers(HeadContext context, std::string binary_dir);
  HeadManagers(const HeadManagers&) = delete;
  HeadManagers& operator=(const HeadManagers&) = delete;

  // Node `i` died: what ran there dies or restarts elsewhere, then the queue runs.
  void NodeDied(int i, const std::string& cause, double now);
  // A job ended: its non-detached actors and its leases go with it, then the queue runs.
  void JobEnded(const std::string& job_id, double now);
  // Rebuilds every manager from the tables read back from the store, by table name: nodes
  // first (every other record names nodes), then placement groups (they hold nodes'
  // resources), jobs (they say which executable each actor and lease may run), actors and
  // leases. The previous head's "pending" records are deleted.
  void Restore(std::map<std::string, TableRecords>& tables, double now);
  // The record `key` of history table `table` expired (docs/redis-schema.md "Retention"):
  // drops the manager's copy of it and returns true, or false when it is still in use (a
  // node alive, an actor not dead, a job running or with live detached actors).
  bool Forget(const std::string& table, const std::string& key);

  HeadContext ctx;
  NodeManager nodes;
  SchedulingQueue queue;
  PlacementGroupManager pgs;
  JobManager jobs;
  DriverRecords records;
  AutoscalerView autoscaler;
  ResourceBook book;
  ActorManager actors;
  LeaseManager leases;
  SubmissionManager submissions;
};

}  // namespace orrery::scheduler
