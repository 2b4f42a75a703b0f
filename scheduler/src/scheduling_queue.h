// The head's scheduling queue: every demand that waits for room (actors, task leases,
// placement groups), tried in arrival order whenever something may have changed. Why each
// waits is written to the "pending" table when it changes (docs/redis-schema.md).
// docs/architecture.md "The head".
#pragma once

#include <deque>
#include <string>

#include "scheduler/src/head_context.h"

namespace orrery::scheduler {

enum class DemandKind { kActor = 0, kLease = 1, kPg = 2 };

// A manager whose demands wait in the queue.
class DemandSource {
 public:
  // Tries to place demand `id`, queued at `since`. True when it is done (placed, failed or
  // gone); otherwise *reason says why it waits.
  virtual bool TryPlace(const std::string& id, double since, double now, std::string* reason) = 0;
  // What the demand asks for, in words (the "pending" record's "demand").
  virtual std::string Describe(const std::string& id) const = 0;

 protected:
  ~DemandSource() = default;
};

class SchedulingQueue {
 public:
  explicit SchedulingQueue(HeadContext ctx) : ctx_(std::move(ctx)) {}
  void SetSource(DemandKind kind, DemandSource* source) { sources_[int(kind)] = source; }

  void Push(DemandKind kind, const std::string& id, double now);
  // Removes a demand (and its "pending" record); nothing when it is not queued.
  void Erase(DemandKind kind, const std::string& id);
  // Tries every queued demand, in arrival order.
  void ScheduleAll(double now);
  size_t size() const { return pending_.size(); }
  // Calls f(kind, id, since) for each queued demand, in arrival order.
  template <typename F>
  void ForEach(F&& f) const {
    for (const auto& p : pending_) f(p.kind, p.id, p.since);
  }
  // Deletes the "pending" records a previous head left (a new head writes its own).
  void DropStoredRecords(const TableRecords& records);

 private:
  struct Pending {
    DemandKind kind;
    std::string id;
    double since;
    std::string reason;  // why it waits, as last written to the "pending" table
  };
  void WriteReason(const Pending& p, double now);

  HeadContext ctx_;
  DemandSource* sources_[3] = {nullptr, nullptr, nullptr};
  std::deque<Pending> pending_;
};

}  // namespace orrery::scheduler
