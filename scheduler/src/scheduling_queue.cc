#include "scheduler/src/scheduling_queue.h"

#include <nlohmann/json.hpp>

#include "scheduler/src/records.h"

namespace orrery::scheduler {

void SchedulingQueue::Push(DemandKind kind, const std::string& id, double now) {
  pending_.push_back({kind, id, now, ""});
}

void SchedulingQueue::Erase(DemandKind kind, const std::string& id) {
  for (auto p = pending_.begin(); p != pending_.end(); ++p) {
    if (p->kind == kind && p->id == id) {
      if (!p->reason.empty()) ctx_.store->Delete("pending", Hex(id));
      pending_.erase(p);
      return;
    }
  }
}

void SchedulingQueue::ScheduleAll(double now) {
  std::string reason;
  for (auto it = pending_.begin(); it != pending_.end();) {
    reason.clear();
    DemandSource* source = sources_[int(it->kind)];
    if (source->TryPlace(it->id, it->since, now, &reason)) {
      if (!it->reason.empty()) ctx_.store->Delete("pending", Hex(it->id));
      it = pending_.erase(it);
      continue;
    }
    if (reason != it->reason) {  // written only when it changes, not every tick
      it->reason = reason;
      WriteReason(*it, now);
    }
    ++it;
  }
}

void SchedulingQueue::WriteReason(const Pending& p, double now) {
  static const char* kKinds[] = {"actor", "task", "placement_group"};
  nlohmann::json j{{"id", Hex(p.id)},
                   {"kind", kKinds[int(p.kind)]},
                   {"demand", sources_[int(p.kind)]->Describe(p.id)},
                   {"reason", p.reason},
                   {"waiting_s", now - p.since}};
  ctx_.store->Put("pending", Hex(p.id), records::Dump(j));
}

void SchedulingQueue::DropStoredRecords(const TableRecords& records) {
  for (const auto& [id, text] : records) ctx_.store->Delete("pending", id);
}

}  // namespace orrery::scheduler
