// The head's task leases: a driver asks for a worker slot with some resources; the lease
// waits in the scheduling queue, is granted on a node (which runs the tasks), and ends when
// returned, when its worker dies, or with its node or job. docs/architecture.md "The head".
#pragma once

#include <map>
#include <string>

#include "scheduler/src/head_context.h"
#include "scheduler/src/job_manager.h"
#include "scheduler/src/node_manager.h"
#include "scheduler/src/placement_group_manager.h"
#include "scheduler/src/resource_book.h"
#include "scheduler/src/scheduling_queue.h"

namespace orrery::scheduler {

struct LeaseEntry {
  proto::LeaseRequestMsg request;
  int node = -1;  // granted: its node index
  int bundle = -1;
};

class LeaseManager final : public DemandSource {
 public:
  LeaseManager(HeadContext ctx, NodeManager& nodes, ResourceBook& book, SchedulingQueue& queue,
               const JobManager& jobs, const PlacementGroupManager& pgs)
      : ctx_(std::move(ctx)), nodes_(nodes), book_(book), queue_(queue), jobs_(jobs), pgs_(pgs) {}

  void OnRequest(const proto::LeaseRequestMsg& m, double now);
  void OnReturn(const proto::ReturnLeaseMsg& m, double now);
  // A node says the worker of a lease granted there died or never started.
  void OnWorkerEvent(const proto::WorkerEventMsg& m, int node, double now);
  // The leases on a dead node fail (their holders resubmit).
  void NodeDied(int node, const std::string& cause);
  // A job ended: its leases are released or withdrawn.
  void JobEnded(const std::string& job_id);
  // The process at `address` (a worker that asked for leases: an actor or task that submits
  // tasks) exited: its leases end, as it can no longer return them: a granted one's worker is
  // killed (it may still run the gone process's tasks) and its resources come back; a pending
  // one is withdrawn.
  void RequesterGone(const std::string& address, double now);

  bool TryPlace(const std::string& id, double since, double now, std::string* reason) override;
  std::string Describe(const std::string& id) const override;

  const LeaseEntry* Find(const std::string& lease_id) const;
  size_t size() const { return leases_.size(); }
  // Rebuilds the leases from the "leases" table (after nodes, groups and jobs): a granted
  // one still holds its resources (its worker runs on); a pending one waits again. One whose
  // node, job or placement group is gone has nothing left to hold and is deleted.
  void Restore(const TableRecords& records, double now);

 private:
  Status Validate(const proto::LeaseRequestMsg& m) const;
  void Refuse(const proto::LeaseRequestMsg& r, proto::ErrorKind kind,
              const std::string& message) const;
  // Ends a lease: gives back what it holds (telling its node), or withdraws it from the queue.
  void Finish(std::map<std::string, LeaseEntry>::iterator it);
  void Persist(const LeaseEntry& l);
  void Forget(const std::string& lease_id);

  HeadContext ctx_;
  NodeManager& nodes_;
  ResourceBook& book_;
  SchedulingQueue& queue_;
  const JobManager& jobs_;
  const PlacementGroupManager& pgs_;
  std::map<std::string, LeaseEntry> leases_;  // by binary id
};

}  // namespace orrery::scheduler
