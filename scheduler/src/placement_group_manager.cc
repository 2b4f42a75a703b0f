#include "scheduler/src/placement_group_manager.h"

#include "core/internal/log.h"
#include "orrery/resources.h"
#include "scheduler/src/records.h"

namespace orrery::scheduler {

using proto::MsgType;

void PlacementGroupManager::Reply(const std::string& to, uint64_t request_id, const PgEntry* pg,
                                  bool ok, proto::ErrorKind kind,
                                  const std::string& message) const {
  proto::PlacementGroupReplyMsg r;
  r.request_id = request_id;
  r.ok = ok;
  r.error_kind = kind;
  r.message = message;
  if (pg) {
    r.ready = pg->state == PgEntry::kCreated;
    r.pg_id = pg->spec.pg_id;
    r.bundles = pg->spec.bundles;
    r.strategy = pg->spec.strategy;
    r.name = pg->spec.name;
    if (!r.ready && r.message.empty()) r.message = pg->reason;
  }
  ctx_.outbox->Send(to, MsgType::kPlacementGroupReply, r);
}

Status PlacementGroupManager::Validate(const proto::PlacementGroupMsg& m) const {
  if (m.strategy < 0 || m.strategy > 3)
    return Status::InvalidArgument("unknown placement strategy");
  Status valid = m.pg_id.size() == UniqueId::kSize
                     ? Status::Ok()
                     : Status::InvalidArgument("a placement group id has 16 bytes");
  if (valid.ok()) valid = records::CheckUtf8("the placement group's name", m.name);
  if (valid.ok()) valid = records::CheckUtf8("the placement group's selector", m.label_selector);
  if (valid.ok()) valid = records::CheckUtf8("the placement group's label key", m.same_label);
  for (const auto& b : m.bundles)
    if (valid.ok()) valid = records::CheckUtf8("a bundle's", b);
  if (!valid.ok()) return valid;
  for (const auto& b : m.bundles) {
    Status s = ValidateResources(b);
    if (!s.ok() || b.empty()) {
      return Status::InvalidArgument("bad bundle " + ToString(b) + ": " +
                                     (b.empty() ? "a bundle must not be empty" : s.message()));
    }
  }
  return Status::Ok();
}

void PlacementGroupManager::OnCreate(const proto::PlacementGroupMsg& m, double now) {
  if (m.bundles.empty())
    return Reply(m.reply_to, m.request_id, nullptr, false, proto::ErrorKind::kConfigError,
                 "a placement group needs at least one bundle");
  if (auto known = pgs_.find(m.pg_id); known != pgs_.end()) {  // a resent request
    return Reply(m.reply_to, m.request_id, &known->second, true, proto::ErrorKind::kNone, "");
  }
  if (Status valid = Validate(m); !valid.ok())
    return Reply(m.reply_to, m.request_id, nullptr, false, proto::ErrorKind::kConfigError,
                 valid.message());
  if (!m.name.empty()) {
    auto it = pg_names_.find(m.name);
    if (it != pg_names_.end()) {
      auto named = pgs_.find(it->second);
      if (named != pgs_.end() && named->second.state != PgEntry::kRemoved) {
        return Reply(m.reply_to, m.request_id, nullptr, false,
                     proto::ErrorKind::kPlacementGroupError,
                     "a placement group named '" + m.name + "' already exists");
      }
    }
    pg_names_[m.name] = m.pg_id;
  }
  PgEntry& pg = pgs_[m.pg_id];
  pg.spec = m;
  queue_.Push(DemandKind::kPg, m.pg_id, now);
  queue_.ScheduleAll(now);
  if (pg.state == PgEntry::kPending) Persist(pg);
  Reply(m.reply_to, m.request_id, &pg, true, proto::ErrorKind::kNone, "");
}

void PlacementGroupManager::OnWait(const proto::PlacementGroupMsg& m, double now) {
  std::string id = m.pg_id;
  if (id.empty() && !m.name.empty()) {
    auto it = pg_names_.find(m.name);
    if (it != pg_names_.end()) id = it->second;
  }
  auto it = pgs_.find(id);
  if (it == pgs_.end() || it->second.state == PgEntry::kRemoved) {
    return Reply(
        m.reply_to, m.request_id, nullptr, false, proto::ErrorKind::kPlacementGroupError,
        "no placement group " + (m.name.empty() ? Hex(m.pg_id) : "named '" + m.name + "'"));
  }
  PgEntry& pg = it->second;
  if (pg.state == PgEntry::kCreated || m.timeout_s == 0)
    return Reply(m.reply_to, m.request_id, &pg, true, proto::ErrorKind::kNone, "");
  pg.waiters.push_back({m.request_id, m.reply_to, m.timeout_s < 0 ? -1.0 : now + m.timeout_s});
}

void PlacementGroupManager::OnRemove(const proto::PlacementGroupMsg& m, double now) {
  auto it = pgs_.find(m.pg_id);
  if (it == pgs_.end() || it->second.state == PgEntry::kRemoved) {
    return ctx_.AckWhenStored(m.reply_to, m.request_id);
  }
  PgEntry& pg = it->second;
  if (pg.state == PgEntry::kCreated) {
    // Only what no actor or lease of the group holds goes back now. The rest goes back as
    // each of them ends (ReleaseInBundle): a dying worker keeps its devices until its process
    // exits, and nothing new may be placed on them before.
    for (size_t b = 0; b < pg.spec.bundles.size(); ++b)
      nodes_.Give(pg.node_of_bundle[b], pg.bundle_available[b]);
  }
  pg.state = PgEntry::kRemoved;
  for (const auto& w : pg.waiters)
    Reply(w.reply_to, w.request_id, &pg, false, proto::ErrorKind::kPlacementGroupError,
          "the placement group was removed");
  pg.waiters.clear();
  if (on_removed_) on_removed_(m.pg_id);  // its actors die with it
  Persist(pg);
  ctx_.AckWhenStored(m.reply_to, m.request_id);  // a remover not answered sends it again
  queue_.ScheduleAll(now);
}

void PlacementGroupManager::Tick(double now) {
  for (auto& [id, pg] : pgs_) {
    for (auto w = pg.waiters.begin(); w != pg.waiters.end();) {
      if (w->deadline >= 0 && now >= w->deadline) {
        Reply(w->reply_to, w->request_id, &pg, true, proto::ErrorKind::kNone, "");
        w = pg.waiters.erase(w);
      } else {
        ++w;
      }
    }
  }
}

Decision PlacementGroupManager::ReserveInBundle(const std::string& pg_id, int bundle_index,
                                                const Resources& demand, int* bundle_out) {
  auto it = pgs_.find(pg_id);
  if (it == pgs_.end()) return {Outcome::kInfeasible, -1, "its placement group does not exist"};
  PgEntry& pg = it->second;
  if (pg.state == PgEntry::kRemoved)
    return {Outcome::kInfeasible, -1, "its placement group was removed"};
  int n = int(pg.spec.bundles.size());
  if (bundle_index >= n) {
    return {Outcome::kInfeasible, -1,
            "bundle index " + std::to_string(bundle_index) + " is out of range (the group has " +
                std::to_string(n) + " bundles)"};
  }
  bool feasible = false;
  for (int b = 0; b < n; ++b) {
    if (bundle_index >= 0 && b != bundle_index) continue;
    if (!Fits(demand, pg.spec.bundles[b])) continue;
    feasible = true;
    if (pg.state == PgEntry::kCreated && Fits(demand, pg.bundle_available[b])) {
      *bundle_out = b;
      Subtract(pg.bundle_available[b], demand);
      return {Outcome::kPlaced, pg.node_of_bundle[b], ""};
    }
  }
  if (!feasible) {
    return {Outcome::kInfeasible, -1,
            "no bundle of placement group '" + pg.spec.name + "' can hold " + ToString(demand)};
  }
  return {Outcome::kWait, -1,
          pg.state == PgEntry::kPending ? "waiting for its placement group to be placed"
                                        : "waiting for room in its placement group bundle"};
}

void PlacementGroupManager::ReleaseInBundle(const std::string& pg_id, int bundle,
                                            const Resources& demand) {
  auto it = pgs_.find(pg_id);
  if (it == pgs_.end() || bundle < 0) return;
  PgEntry& pg = it->second;
  if (pg.state == PgEntry::kCreated) {
    Add(pg.bundle_available[size_t(bundle)], demand);
  } else if (pg.state == PgEntry::kRemoved && bundle < int(pg.node_of_bundle.size())) {
    // The group is gone: what this actor or lease held goes back to the node now.
    int n = pg.node_of_bundle[size_t(bundle)];
    if (n >= 0 && n < int(nodes_.size())) nodes_.Give(n, demand);
  }
}

bool PlacementGroupManager::HoldInBundle(const std::string& pg_id, int bundle,
                                         const Resources& demand) {
  auto it = pgs_.find(pg_id);
  if (it == pgs_.end() || bundle < 0 || bundle >= int(it->second.bundle_available.size()))
    return false;
  Subtract(it->second.bundle_available[size_t(bundle)], demand);
  return true;
}

int PlacementGroupManager::CreatedBundles(const std::string& pg_id) const {
  auto it = pgs_.find(pg_id);
  return it == pgs_.end() ? -1 : int(it->second.bundle_available.size());
}

bool PlacementGroupManager::TryPlace(const std::string& id, double, double, std::string* reason) {
  auto it = pgs_.find(id);
  if (it == pgs_.end() || it->second.state != PgEntry::kPending) return true;
  PgEntry& pg = it->second;
  BundleDecision d = PlaceBundlesOn(pg.spec.bundles, PlacementStrategy(pg.spec.strategy),
                                    nodes_.list(), pg.spec.same_label, pg.spec.label_selector);
  if (d.outcome != Outcome::kPlaced) {
    pg.reason = d.reason;
    *reason = d.reason;
    return false;  // placement groups stay pending until removed
  }
  pg.state = PgEntry::kCreated;
  pg.node_of_bundle = d.node_of_bundle;
  pg.bundle_available = pg.spec.bundles;
  for (size_t b = 0; b < pg.spec.bundles.size(); ++b)
    Subtract(nodes_.available(d.node_of_bundle[b]), pg.spec.bundles[b]);
  pg.reason.clear();
  for (const auto& w : pg.waiters)
    Reply(w.reply_to, w.request_id, &pg, true, proto::ErrorKind::kNone, "");
  pg.waiters.clear();
  Persist(pg);
  return true;
}

std::string PlacementGroupManager::Describe(const std::string& id) const {
  auto it = pgs_.find(id);
  return "placement group '" + (it == pgs_.end() ? std::string() : it->second.spec.name) + "'";
}

void PlacementGroupManager::Persist(const PgEntry& pg) {
  records::PgRecord r;
  r.spec = pg.spec;
  r.state = records::PgRecord::State(int(pg.state));
  for (int n : pg.node_of_bundle) r.bundle_nodes.push_back(nodes_.HexId(n));
  r.reason = pg.reason;
  static const char* kStates[] = {"PENDING", "CREATED", "REMOVED"};
  ctx_.store->Put("placement_groups", Hex(pg.spec.pg_id), records::PgRecordJson(r));
  ctx_.Publish("placement_groups", Hex(pg.spec.pg_id), kStates[pg.state]);
}

void PlacementGroupManager::Restore(const TableRecords& records, double now) {
  for (const auto& [key, text] : records) {
    auto r = records::ParsePgRecord(text);
    if (!RecordUsable(r.status(), "placement group", key)) continue;
    if (!FiledUnderItsId(Hex(r->spec.pg_id), "a placement group", key)) continue;
    if (r->state == records::PgRecord::kRemoved) continue;
    PgEntry pg;
    pg.spec = r->spec;
    if (r->state == records::PgRecord::kCreated) {
      pg.state = PgEntry::kCreated;
      pg.bundle_available = pg.spec.bundles;
      for (const auto& hex : r->bundle_nodes) pg.node_of_bundle.push_back(nodes_.IndexOfHex(hex));
      for (size_t b = 0; b < pg.node_of_bundle.size(); ++b) {
        if (pg.node_of_bundle[b] >= 0)
          Subtract(nodes_.available(pg.node_of_bundle[b]), pg.spec.bundles[b]);
      }
    } else {
      queue_.Push(DemandKind::kPg, pg.spec.pg_id, now);
    }
    if (!pg.spec.name.empty()) pg_names_[pg.spec.name] = pg.spec.pg_id;
    pgs_[pg.spec.pg_id] = std::move(pg);
  }
}

}  // namespace orrery::scheduler
