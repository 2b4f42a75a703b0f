// HeadService: placement groups (create, wait, remove). Their placement is in
// head_service.cc (TryPlacePg), with every other demand of the scheduling queue.
#include "core/src/log.h"
#include "orrery/resources.h"
#include "scheduler/src/head_internal.h"
#include "scheduler/src/head_service.h"
#include "scheduler/src/records.h"

namespace orrery::scheduler {

using proto::MsgType;

// ------------------------------------------------------------------ placement groups

void HeadService::ReplyPg(const std::string& to, uint64_t request_id, const PgRec* pg, bool ok,
                          const std::string& kind, const std::string& message) {
  proto::PlacementGroupReplyMsg r;
  r.request_id = request_id;
  r.ok = ok;
  r.error_kind = kind;
  r.message = message;
  if (pg) {
    r.ready = pg->state == PgRec::kCreated;
    r.pg_id = pg->spec.pg_id;
    r.bundles = pg->spec.bundles;
    r.strategy = pg->spec.strategy;
    r.name = pg->spec.name;
    if (!r.ready && r.message.empty()) r.message = pg->reason;
  }
  transport::Send(to, MsgType::kPlacementGroupReply, r);
}

void HeadService::OnCreatePg(const transport::Envelope& env) {
  proto::PlacementGroupMsg m;
  DECODE_OR_THROW(env, m);
  if (m.bundles.empty())
    return ReplyPg(m.reply_to, m.request_id, nullptr, false, "ConfigError",
                   "a placement group needs at least one bundle");
  if (auto known = pgs_.find(m.pg_id); known != pgs_.end()) {  // a resent request
    return ReplyPg(m.reply_to, m.request_id, &known->second, true, "", "");
  }
  if (m.strategy < 0 || m.strategy > 3)
    return ReplyPg(m.reply_to, m.request_id, nullptr, false, "ConfigError",
                   "unknown placement strategy");
  Status valid = m.pg_id.size() == UniqueId::kSize
                     ? Status::Ok()
                     : Status::InvalidArgument("a placement group id has 16 bytes");
  if (valid.ok()) valid = records::CheckUtf8("the placement group's name", m.name);
  if (valid.ok()) valid = records::CheckUtf8("the placement group's selector", m.label_selector);
  if (valid.ok()) valid = records::CheckUtf8("the placement group's label key", m.same_label);
  for (const auto& b : m.bundles)
    if (valid.ok()) valid = records::CheckUtf8("a bundle's", b);
  if (!valid.ok())
    return ReplyPg(m.reply_to, m.request_id, nullptr, false, "ConfigError", valid.message());
  for (const auto& b : m.bundles) {
    Status s = ValidateResources(b);
    if (!s.ok() || b.empty()) {
      return ReplyPg(m.reply_to, m.request_id, nullptr, false, "ConfigError",
                     "bad bundle " + ToString(b) + ": " +
                         (b.empty() ? "a bundle must not be empty" : s.message()));
    }
  }
  if (!m.name.empty()) {
    auto it = pg_names_.find(m.name);
    if (it != pg_names_.end() && pgs_.count(it->second) &&
        pgs_[it->second].state != PgRec::kRemoved) {
      return ReplyPg(m.reply_to, m.request_id, nullptr, false, "PlacementGroupError",
                     "a placement group named '" + m.name + "' already exists");
    }
    pg_names_[m.name] = m.pg_id;
  }
  PgRec& pg = pgs_[m.pg_id];
  pg.spec = m;
  pending_.push_back({PendingKind::kPg, m.pg_id, Now()});
  ScheduleAll();
  if (pg.state == PgRec::kPending) PersistPg(pg);
  ReplyPg(m.reply_to, m.request_id, &pg, true, "", "");
}

void HeadService::OnWaitPg(const transport::Envelope& env) {
  proto::PlacementGroupMsg m;
  DECODE_OR_THROW(env, m);
  std::string id = m.pg_id;
  if (id.empty() && !m.name.empty()) {
    auto it = pg_names_.find(m.name);
    if (it != pg_names_.end()) id = it->second;
  }
  auto it = pgs_.find(id);
  if (it == pgs_.end() || it->second.state == PgRec::kRemoved) {
    return ReplyPg(
        m.reply_to, m.request_id, nullptr, false, "PlacementGroupError",
        "no placement group " + (m.name.empty() ? Hex(m.pg_id) : "named '" + m.name + "'"));
  }
  PgRec& pg = it->second;
  if (pg.state == PgRec::kCreated || m.timeout_s == 0)
    return ReplyPg(m.reply_to, m.request_id, &pg, true, "", "");
  pg.waiters.push_back({m.request_id, m.reply_to, m.timeout_s < 0 ? -1.0 : Now() + m.timeout_s});
}

void HeadService::OnRemovePg(const transport::Envelope& env) {
  proto::PlacementGroupMsg m;
  DECODE_OR_THROW(env, m);
  auto it = pgs_.find(m.pg_id);
  if (it == pgs_.end() || it->second.state == PgRec::kRemoved) {
    return ReplyAck(m.reply_to, m.request_id, true, "", "");
  }
  PgRec& pg = it->second;
  if (pg.state == PgRec::kCreated) {
    // Only what no actor or lease of the group holds goes back now. The rest goes back as
    // each of them ends (Release): a dying worker keeps its devices until its process exits,
    // and nothing new may be placed on them before.
    for (size_t b = 0; b < pg.spec.bundles.size(); ++b)
      Add(nodes_[pg.node_of_bundle[b]].available, pg.bundle_available[b]);
  }
  pg.state = PgRec::kRemoved;
  for (const auto& w : pg.waiters)
    ReplyPg(w.reply_to, w.request_id, &pg, false, "PlacementGroupError",
            "the placement group was removed");
  pg.waiters.clear();
  // Actors in the group die with it.
  for (auto& [id, a] : actors_) {
    if (a.spec.options.placement_group != m.pg_id || a.state == proto::ActorState::kDead) continue;
    a.kill_requested = true;
    if (a.node >= 0) {
      transport::Send(node_addresses_[a.node], MsgType::kKillWorker,
                      proto::KillWorkerMsg{a.spec.actor_id, "", "its placement group was removed"});
    }
  }
  PersistPg(pg);
  ReplyAck(m.reply_to, m.request_id, true, "", "");
  ScheduleAll();
}

}  // namespace orrery::scheduler
