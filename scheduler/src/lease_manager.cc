#include "scheduler/src/lease_manager.h"

#include "core/internal/log.h"
#include "orrery/resources.h"
#include "scheduler/src/records.h"

namespace orrery::scheduler {

using proto::MsgType;

Status LeaseManager::Validate(const proto::LeaseRequestMsg& m) const {
  if (m.lease_id.size() != UniqueId::kSize)
    return Status::InvalidArgument("a lease id has 16 bytes");
  if (Status s = records::CheckUtf8("the task's", m.resources); !s.ok()) return s;
  if (Status s = records::CheckUtf8("the task's selector", m.label_selector); !s.ok()) return s;
  return jobs_.CheckExecutable(m.job_id, m.argv, m.binary_hash);
}

void LeaseManager::Refuse(const proto::LeaseRequestMsg& r, proto::ErrorKind kind,
                          const std::string& message) const {
  proto::LeaseReplyMsg reply;
  reply.request_id = r.request_id;
  reply.lease_id = r.lease_id;
  reply.ok = false;
  reply.error_kind = kind;
  reply.message = message;
  ctx_.outbox->Send(r.reply_to, MsgType::kLeaseReply, reply);
}

void LeaseManager::OnRequest(const proto::LeaseRequestMsg& m, double now) {
  if (auto it = leases_.find(m.lease_id); it != leases_.end()) {
    // A resent request: its holder has not heard of a grant. One still queued waits on; a
    // granted one's grant goes to its node again (the node ignores it if it holds the lease
    // already), as a head that stopped just after granting may never have sent it.
    const LeaseEntry& l = it->second;
    if (l.node >= 0 && l.request.reply_to == m.reply_to)
      ctx_.outbox->Send(nodes_.address(l.node), MsgType::kGrantLease,
                        proto::GrantLeaseMsg{l.request});
    return;
  }
  if (Status valid = Validate(m); !valid.ok()) {
    if (valid.code() == StatusCode::kPermissionDenied)
      LOG_WARN("refused a lease: " + valid.message());
    return Refuse(m, proto::ErrorKind::kConfigError, valid.message());
  }
  LeaseEntry& l = leases_[m.lease_id];
  l.request = m;
  queue_.Push(DemandKind::kLease, m.lease_id, now);
  Persist(l);  // a restarted head still knows it (docs/redis-schema.md "leases")
  queue_.ScheduleAll(now);
}

void LeaseManager::Finish(std::map<std::string, LeaseEntry>::iterator it) {
  LeaseEntry& l = it->second;
  if (l.node < 0) {
    queue_.Erase(DemandKind::kLease, it->first);  // still pending: withdrawn
  } else {
    book_.Release(l.node, l.request.placement_group, l.bundle, l.request.resources);
    ctx_.outbox->Send(nodes_.address(l.node), MsgType::kReleaseLease,
                      proto::ReleaseLeaseMsg{it->first});
  }
  Forget(it->first);
  leases_.erase(it);
}

void LeaseManager::OnReturn(const proto::ReturnLeaseMsg& m, double now) {
  // Acknowledged, whatever it found, once Redis has what it changed: the holder sends it again
  // until then, so a head restarted before the lease's end was stored hears of it again.
  auto it = leases_.find(m.lease_id);
  if (it == leases_.end()) return ctx_.AckWhenStored(m.reply_to, m.request_id);
  Finish(it);
  ctx_.AckWhenStored(m.reply_to, m.request_id);
  queue_.ScheduleAll(now);
}

void LeaseManager::OnWorkerEvent(const proto::WorkerEventMsg& m, int node, double now) {
  auto it = leases_.find(m.lease_id);
  if (it == leases_.end() || it->second.node != node) return;
  LeaseEntry& l = it->second;
  book_.Release(l.node, l.request.placement_group, l.bundle, l.request.resources);
  Forget(it->first);
  leases_.erase(it);
  queue_.ScheduleAll(now);
}

void LeaseManager::NodeDied(int node, const std::string& cause) {
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.node != node) {
      ++it;
      continue;
    }
    proto::LeaseReplyMsg r;
    r.lease_id = it->first;
    r.ok = false;
    r.error_kind = proto::ErrorKind::kWorkerDied;
    r.message = "its node " + nodes_.HexId(node) + " died: " + cause;
    ctx_.outbox->Send(it->second.request.reply_to, MsgType::kLeaseReply, r);
    Forget(it->first);
    it = leases_.erase(it);
  }
}

void LeaseManager::RequesterGone(const std::string& address, double now) {
  if (address.empty()) return;
  bool any = false;
  for (auto it = leases_.begin(); it != leases_.end();) {
    LeaseEntry& l = it->second;
    if (l.request.reply_to != address) {
      ++it;
      continue;
    }
    any = true;
    if (l.node < 0) {
      queue_.Erase(DemandKind::kLease, it->first);  // still pending: withdrawn
    } else {
      // Its worker may still run the tasks of the process that is gone, whose results no one
      // can have: it goes, and its resources come back now.
      book_.Release(l.node, l.request.placement_group, l.bundle, l.request.resources);
      ctx_.outbox->Send(nodes_.address(l.node), MsgType::kKillWorker,
                        proto::KillWorkerMsg{
                            "", it->first, "the process that leased it (" + address + ") exited"});
    }
    Forget(it->first);
    it = leases_.erase(it);
  }
  if (any) queue_.ScheduleAll(now);
}

void LeaseManager::JobEnded(const std::string& job_id) {
  for (auto it = leases_.begin(); it != leases_.end();) {
    auto next = std::next(it);
    if (it->second.request.job_id == job_id) Finish(it);
    it = next;
  }
}

bool LeaseManager::TryPlace(const std::string& id, double since, double now, std::string* reason) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return true;
  LeaseEntry& l = it->second;
  const auto& r = l.request;
  Decision d = book_.Reserve({r.resources, r.label_selector, r.strategy, r.affinity_node,
                              r.affinity_soft, r.placement_group, r.bundle_index},
                             &l.bundle);
  if (d.outcome == Outcome::kPlaced) {
    l.node = d.node_index;
    Persist(l);
    ctx_.outbox->Send(nodes_.address(l.node), MsgType::kGrantLease, proto::GrantLeaseMsg{r});
    return true;
  }
  if (d.outcome == Outcome::kInfeasible && r.infeasible_timeout_s >= 0 &&
      now - since >= r.infeasible_timeout_s) {
    Refuse(r, proto::ErrorKind::kInfeasibleError, "task cannot be scheduled: " + d.reason);
    Forget(id);
    leases_.erase(it);
    return true;
  }
  *reason = (d.outcome == Outcome::kInfeasible ? "infeasible: " : "") + d.reason;
  return false;
}

std::string LeaseManager::Describe(const std::string& id) const {
  auto it = leases_.find(id);
  return "tasks needing " +
         (it == leases_.end() ? std::string("{}") : ToString(it->second.request.resources));
}

const LeaseEntry* LeaseManager::Find(const std::string& lease_id) const {
  auto it = leases_.find(lease_id);
  return it == leases_.end() ? nullptr : &it->second;
}

void LeaseManager::Persist(const LeaseEntry& l) {
  records::LeaseRecord r{l.request, nodes_.HexId(l.node), l.bundle};
  ctx_.store->Put("leases", Hex(l.request.lease_id), records::LeaseRecordJson(r));
}

void LeaseManager::Forget(const std::string& lease_id) {
  ctx_.store->Delete("leases", Hex(lease_id));
}

void LeaseManager::Restore(const TableRecords& records, double now) {
  for (const auto& [key, text] : records) {
    auto r = records::ParseLeaseRecord(text);
    if (!RecordUsable(r.status(), "lease", key)) continue;
    const proto::LeaseRequestMsg& req = r->request;
    int node = r->node_id.empty() ? -1 : nodes_.IndexOfHex(r->node_id);
    bool granted = !r->node_id.empty();
    bool in_group = !req.placement_group.empty();
    int bundles = in_group ? pgs_.CreatedBundles(req.placement_group) : 0;
    bool group_ok =
        !in_group || (bundles >= 0 && (!granted || (r->bundle >= 0 && r->bundle < bundles)));
    Status executable = jobs_.CheckExecutable(req.job_id, req.argv, req.binary_hash);
    if (!executable.ok())
      LOG_WARN("dropping lease record " + records::EscapeUtf8(key) + ": " + executable.message());
    if (!executable.ok() || Hex(req.lease_id) != key || !jobs_.IsAlive(req.job_id) || !group_ok ||
        (granted && (node < 0 || !nodes_.alive(node))) || leases_.count(req.lease_id)) {
      ctx_.store->Delete("leases", key);
      continue;
    }
    LeaseEntry l{std::move(r->request), node, granted ? r->bundle : -1};
    if (granted) {
      book_.Hold(node, l.request.placement_group, &l.bundle, l.request.resources);
    } else {
      queue_.Push(DemandKind::kLease, l.request.lease_id, now);
    }
    std::string id = l.request.lease_id;
    leases_[id] = std::move(l);
  }
}

}  // namespace orrery::scheduler
