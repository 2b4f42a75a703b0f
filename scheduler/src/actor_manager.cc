#include "scheduler/src/actor_manager.h"

#include <algorithm>

#include "core/internal/log.h"
#include "orrery/resources.h"
#include "scheduler/src/records.h"

namespace orrery::scheduler {

using proto::ActorState;
using proto::MsgType;

namespace {
proto::ActorUpdateMsg UnknownActor(const std::string& actor_id) {
  proto::ActorUpdateMsg u;
  u.actor_id = actor_id;
  u.state = int(ActorState::kDead);
  u.death_kind = proto::ErrorKind::kActorDiedError;
  u.death_cause = "no actor with id " + Hex(actor_id) + " is known to the head";
  return u;
}
}  // namespace

template <typename Key>
std::vector<std::string> ActorManager::Members(const std::map<Key, std::set<std::string>>& index,
                                               const Key& key) {
  auto it = index.find(key);
  return it == index.end() ? std::vector<std::string>()
                           : std::vector<std::string>(it->second.begin(), it->second.end());
}

Status ActorManager::Validate(const proto::CreateActorMsg& m) const {
  if (m.spec.actor_id.size() != UniqueId::kSize)
    return Status::InvalidArgument("an actor id has 16 bytes");
  if (Status s = records::CheckActorSpec(m.spec); !s.ok()) return s;
  if (Status s = jobs_.CheckExecutable(m.spec.job_id, m.spec.argv, m.spec.binary_hash); !s.ok()) {
    LOG_WARN("refused to create an actor: " + s.message());
    return s;
  }
  return Status::Ok();
}

void ActorManager::OnCreate(const proto::CreateActorMsg& m, double now) {
  if (actors_.count(m.spec.actor_id))  // a resent request: it was taken already
    return ctx_.Ack(m.reply_to, m.request_id);
  if (Status s = Validate(m); !s.ok())
    return ctx_.Ack(m.reply_to, m.request_id, false, proto::ErrorKind::kConfigError, s.message());
  const auto& opts = m.spec.options;
  if (!opts.name.empty()) {
    auto key = std::make_pair(opts.namespace_, opts.name);
    auto it = named_.find(key);
    if (it != named_.end()) {
      auto a = actors_.find(it->second);
      if (a != actors_.end() && a->second.state != ActorState::kDead) {
        return ctx_.Ack(m.reply_to, m.request_id, false, proto::ErrorKind::kError,
                        "an actor named '" + opts.name + "' already exists in namespace '" +
                            opts.namespace_ + "'");
      }
    }
    named_[key] = m.spec.actor_id;
  }
  ActorEntry& a = actors_[m.spec.actor_id];
  a.spec = m.spec;
  a.subscribers.insert(m.spec.owner);
  Index(a);
  queue_.Push(DemandKind::kActor, m.spec.actor_id, now);
  queue_.ScheduleAll(now);
  // Recorded before the ack: when placed (or failed) above, as such; otherwise as pending.
  // The creator sends it again until acknowledged. The ack does not wait for Redis (the
  // head keeps serving through an outage, its writes queued): it says the head has it.
  if (a.node < 0 && a.state == ActorState::kPending) Persist(a);
  ctx_.Ack(m.reply_to, m.request_id);
  // Those who subscribed before the creation came hear of it now, and of what follows.
  if (auto w = waiting_.find(m.spec.actor_id); w != waiting_.end()) {
    for (const auto& [subscriber, since] : w->second) {
      a.subscribers.insert(subscriber);
      ctx_.outbox->Send(subscriber, MsgType::kActorUpdate, UpdateOf(a));
    }
    waiting_count_ -= w->second.size();
    waiting_.erase(w);
    Persist(a);
  }
}

void ActorManager::Tick(double now) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto& subs = it->second;
    auto expired = [&](const auto& s) { return now - s.second >= kUnknownActorGraceS; };
    for (const auto& s : subs) {
      if (expired(s)) ctx_.outbox->Send(s.first, MsgType::kActorUpdate, UnknownActor(it->first));
    }
    size_t before = subs.size();
    subs.erase(std::remove_if(subs.begin(), subs.end(), expired), subs.end());
    waiting_count_ -= before - subs.size();
    it = subs.empty() ? waiting_.erase(it) : std::next(it);
  }
}

proto::ActorUpdateMsg ActorManager::UpdateOf(const ActorEntry& a) const {
  proto::ActorUpdateMsg u;
  u.actor_id = a.spec.actor_id;
  u.state = int(a.state);
  u.address = a.address;
  u.control_address = a.control_address;
  u.incarnation = a.incarnation;
  u.death_kind = a.death_kind;
  u.death_cause = a.death_cause;
  u.node_id = a.node >= 0 ? nodes_.at(a.node).view.id.Binary() : std::string();
  u.pid = a.pid;
  return u;
}

void ActorManager::Notify(const ActorEntry& a) const {
  proto::ActorUpdateMsg u = UpdateOf(a);
  for (const auto& s : a.subscribers) ctx_.outbox->Send(s, MsgType::kActorUpdate, u);
}

void ActorManager::OnSubscribe(const proto::SubscribeActorMsg& m, double now) {
  // Subscribers are stored in the actor's record: an address must be UTF-8 text.
  if (Status s = records::CheckUtf8("a subscriber address", m.reply_to); !s.ok())
    throw std::runtime_error(s.message());
  auto it = actors_.find(m.actor_id);
  if (it == actors_.end()) {
    if (m.actor_id.size() == UniqueId::kSize && waiting_count_ < kMaxWaitingSubscriptions) {
      auto& subs = waiting_[m.actor_id];
      // Sent again (the subscriber heard nothing yet): it waits once, since its first time.
      for (const auto& s : subs)
        if (s.first == m.reply_to) return;
      subs.emplace_back(m.reply_to, now);
      ++waiting_count_;
      return;
    }
    return ctx_.outbox->Send(m.reply_to, MsgType::kActorUpdate, UnknownActor(m.actor_id));
  }
  it->second.subscribers.insert(m.reply_to);
  ctx_.outbox->Send(m.reply_to, MsgType::kActorUpdate, UpdateOf(it->second));
}

void ActorManager::OnGetNamed(const proto::NamedActorMsg& msg) const {
  proto::NamedActorMsg m = msg;
  auto it = named_.find({m.namespace_, m.name});
  m.actor_id.clear();
  if (it != named_.end()) {
    auto a = actors_.find(it->second);
    if (a != actors_.end() && a->second.state != ActorState::kDead) m.actor_id = it->second;
  }
  ctx_.outbox->Send(m.reply_to, MsgType::kGetNamedActorReply, m);
}

void ActorManager::KillOnNode(const ActorEntry& a, const std::string& reason) {
  ctx_.outbox->Send(nodes_.address(a.node), MsgType::kKillWorker,
                    proto::KillWorkerMsg{a.spec.actor_id, "", reason});
}

void ActorManager::OnKill(const proto::KillActorMsg& m) {
  Kill(m);
  // Acknowledged whatever it found, once stored: the caller sends it again until then.
  ctx_.AckWhenStored(m.reply_to, m.request_id);
}

void ActorManager::Kill(const proto::KillActorMsg& m) {
  auto it = actors_.find(m.actor_id);
  if (it == actors_.end()) return;
  ActorEntry& a = it->second;
  if (a.state == ActorState::kDead) return;
  a.kill_requested = m.no_restart;
  if (a.node >= 0) {
    // Alive, or placed but not yet alive: the node kills the worker as soon as it can. The
    // kill is recorded, so that a head restarted before the worker's death does not restart it.
    Persist(a);
    return KillOnNode(a, "killed by orrery::Kill");
  }
  // Not placed: nothing runs; it dies here.
  queue_.Erase(DemandKind::kActor, m.actor_id);
  Died(a, proto::ErrorKind::kActorDiedError,
       "the actor was killed by orrery::Kill before it started", false, Now());
}

void ActorManager::FreeName(const ActorEntry& a) {
  if (a.spec.options.name.empty()) return;
  auto it = named_.find({a.spec.options.namespace_, a.spec.options.name});
  if (it != named_.end() && it->second == a.spec.actor_id) named_.erase(it);
}

void ActorManager::Died(ActorEntry& a, proto::ErrorKind kind, const std::string& cause,
                        bool allow_restart, double now) {
  if (a.node >= 0) {
    book_.Release(a.node, a.spec.options.placement_group, a.bundle, a.spec.options.resources);
    SetNode(a, -1);
    a.bundle = -1;
  }
  a.address.clear();
  a.control_address.clear();
  a.pid = 0;
  a.death_kind = kind;  // of the last death: callers of the lost calls get this kind
  a.death_cause = cause;
  int max = a.spec.options.max_restarts;
  if (allow_restart && !a.kill_requested && (max < 0 || a.restarts_used < max)) {
    ++a.restarts_used;
    ++a.incarnation;
    a.state = ActorState::kRestarting;
    LOG_INFO("actor " + Hex(a.spec.actor_id) + " restarting (" + std::to_string(a.restarts_used) +
             "/" + std::to_string(max) + "): " + cause);
    queue_.Push(DemandKind::kActor, a.spec.actor_id, now);
  } else {
    a.state = ActorState::kDead;
    a.end_time = WallSeconds();
    LOG_INFO("actor " + Hex(a.spec.actor_id) + " is dead: " + cause);
    FreeName(a);
    Unindex(a);
  }
  Persist(a);
  Notify(a);
}

void ActorManager::OnWorkerEvent(const proto::WorkerEventMsg& m, int node, double now) {
  auto it = actors_.find(m.actor_id);
  if (it == actors_.end() || it->second.node != node) {
    // A worker this head did not place there: one the head never stored before it restarted,
    // placed again elsewhere, or an incarnation it gave up with its node. Nothing else would
    // stop it or count what it holds. (The node's own worker of the actor is never killed:
    // on its node, only the incarnation tells them apart.)
    if (proto::WorkerEventKind(m.kind) == proto::WorkerEventKind::kActorAlive) {
      ctx_.outbox->Send(
          nodes_.address(node), MsgType::kKillWorker,
          proto::KillWorkerMsg{m.actor_id, "", "the head did not place this actor on this node"});
    }
    return;
  }
  if (it->second.incarnation != m.incarnation) return;
  ActorEntry& a = it->second;
  if (a.state == ActorState::kDead) return;  // a late resend of its worker's start, say
  if (proto::WorkerEventKind(m.kind) == proto::WorkerEventKind::kActorAlive) {
    // The node sends it again until stored: a resend tells no one anything new.
    if (a.state == ActorState::kAlive && a.address == m.address && a.pid == m.pid) return;
    a.state = ActorState::kAlive;
    a.address = m.address;
    a.control_address = m.control_address;
    a.pid = m.pid;
    Persist(a);
    return Notify(a);
  }
  bool creation_failed = m.error_kind == proto::ErrorKind::kCreationFailed;
  // The kinds a node reports that callers see as such; anything else is ActorDiedError.
  proto::ErrorKind kind = m.error_kind == proto::ErrorKind::kOutOfMemoryError
                              ? m.error_kind
                              : proto::ErrorKind::kActorDiedError;
  Died(a, kind, m.cause, !creation_failed, now);
}

void ActorManager::NodeDied(int node, const std::string& cause, double now) {
  std::string why = "its node " + nodes_.HexId(node) + " died: " + cause;
  for (const std::string& id : Members(on_node_, node)) {
    ActorEntry& a = actors_.at(id);
    if (a.state != ActorState::kDead) Died(a, proto::ErrorKind::kActorDiedError, why, true, now);
  }
}

void ActorManager::JobEnded(const std::string& job_id) {
  std::string why = "its owner (job " + Hex(job_id) + ") is gone";
  for (const std::string& id : Members(of_job_, job_id)) {
    ActorEntry& a = actors_.at(id);
    if (a.spec.options.lifetime == kDetachedLifetime || a.state == ActorState::kDead) continue;
    a.kill_requested = true;
    // The name is free at once: the next run of the same program may take it before the
    // node has reported this actor's worker gone.
    FreeName(a);
    if (a.node >= 0) {
      KillOnNode(a, why);
    } else {
      queue_.Erase(DemandKind::kActor, id);
      Died(a, proto::ErrorKind::kActorDiedError, why, false, Now());
    }
  }
}

void ActorManager::PlacementGroupRemoved(const std::string& pg_id) {
  for (const std::string& id : Members(in_group_, pg_id)) {
    ActorEntry& a = actors_.at(id);
    if (a.state == ActorState::kDead) continue;
    a.kill_requested = true;
    if (a.node >= 0) KillOnNode(a, "its placement group was removed");
  }
}

bool ActorManager::TryPlace(const std::string& id, double since, double now, std::string* reason) {
  auto it = actors_.find(id);
  if (it == actors_.end() || it->second.state == ActorState::kDead) return true;
  ActorEntry& a = it->second;
  const auto& o = a.spec.options;
  Decision d = book_.Reserve({o.resources, o.label_selector, o.strategy, o.affinity_node,
                              o.affinity_soft, o.placement_group, o.bundle_index},
                             &a.bundle);
  if (d.outcome == Outcome::kPlaced) {
    SetNode(a, d.node_index);
    Persist(a);  // a head restarted from here on knows it is placed: no second start
    ctx_.outbox->Send(nodes_.address(a.node), MsgType::kStartActor,
                      proto::StartActorMsg{a.spec, a.incarnation});
    return true;
  }
  double limit = a.spec.infeasible_timeout_s;
  if (d.outcome == Outcome::kInfeasible && limit >= 0 && now - since >= limit) {
    Died(a, proto::ErrorKind::kInfeasibleError,
         "actor " + a.spec.factory + " cannot be scheduled: " + d.reason, false, now);
    return true;
  }
  *reason = (d.outcome == Outcome::kInfeasible ? "infeasible: " : "") + d.reason;
  return false;
}

std::string ActorManager::Describe(const std::string& id) const {
  auto it = actors_.find(id);
  if (it == actors_.end()) return "";
  return it->second.spec.factory + " " + ToString(it->second.spec.options.resources);
}

const ActorEntry* ActorManager::Find(const std::string& actor_id) const {
  auto it = actors_.find(actor_id);
  return it == actors_.end() ? nullptr : &it->second;
}

bool ActorManager::Forget(const std::string& actor_hex) {
  auto it = actors_.find(UniqueId::FromHex(actor_hex).Binary());
  if (it == actors_.end()) return true;
  if (it->second.state != ActorState::kDead) return false;
  actors_.erase(it);
  return true;
}

void ActorManager::Persist(const ActorEntry& a) {
  records::ActorRecord r;
  r.spec = a.spec;
  r.state = a.state;
  r.incarnation = a.incarnation;
  r.restarts_used = a.restarts_used;
  r.kill_requested = a.kill_requested;
  r.node_id = nodes_.HexId(a.node);
  r.bundle = a.bundle;
  r.address = a.address;
  r.pid = a.pid;
  r.death_kind = proto::ErrorKindName(a.death_kind);
  r.death_cause = a.death_cause;
  r.subscribers.assign(a.subscribers.begin(), a.subscribers.end());
  r.end_time = a.end_time;
  ctx_.store->Put("actors", Hex(a.spec.actor_id), records::ActorRecordJson(r));
  ctx_.Publish("actors", Hex(a.spec.actor_id), records::ActorStateName(a.state));
}

void ActorManager::Adopt(ActorEntry a, double now) {
  if (a.state == ActorState::kDead) {
    if (a.death_kind == proto::ErrorKind::kNone) a.death_kind = proto::ErrorKind::kActorDiedError;
    a.node = -1;
  } else {
    if (a.node >= 0) {
      // Placed before the restart: it still holds its resources.
      book_.Hold(a.node, a.spec.options.placement_group, &a.bundle, a.spec.options.resources);
    } else {
      a.bundle = -1;
      queue_.Push(DemandKind::kActor, a.spec.actor_id, now);
    }
    if (!a.spec.options.name.empty())
      named_[{a.spec.options.namespace_, a.spec.options.name}] = a.spec.actor_id;
  }
  std::string id = a.spec.actor_id;
  ActorEntry& entry = actors_[id] = std::move(a);
  if (entry.state != ActorState::kDead) {
    Index(entry);
    if (entry.node >= 0) on_node_[entry.node].insert(id);
  }
}

void ActorManager::SetNode(ActorEntry& a, int node) {
  if (a.node >= 0) {
    auto it = on_node_.find(a.node);
    if (it != on_node_.end() && it->second.erase(a.spec.actor_id) && it->second.empty())
      on_node_.erase(it);
  }
  a.node = node;
  if (node >= 0) on_node_[node].insert(a.spec.actor_id);
}

void ActorManager::Index(const ActorEntry& a) {
  of_job_[a.spec.job_id].insert(a.spec.actor_id);
  if (!a.spec.options.placement_group.empty())
    in_group_[a.spec.options.placement_group].insert(a.spec.actor_id);
}

void ActorManager::Unindex(const ActorEntry& a) {
  auto drop = [&](std::map<std::string, std::set<std::string>>& index, const std::string& key) {
    auto it = index.find(key);
    if (it != index.end() && it->second.erase(a.spec.actor_id) && it->second.empty())
      index.erase(it);
  };
  drop(of_job_, a.spec.job_id);
  drop(in_group_, a.spec.options.placement_group);
}

void ActorManager::Restore(const TableRecords& records, double now) {
  for (const auto& [key, text] : records) {
    auto r = records::ParseActorRecord(text);
    if (!RecordUsable(r.status(), "actor", key)) continue;
    if (!FiledUnderItsId(Hex(r->spec.actor_id), "an actor", key)) continue;
    if (r->state != ActorState::kDead) {
      // What a live actor runs must be what its job registered, as this head stored it: a
      // record written by anyone else into the store never names what a node runs.
      Status s = jobs_.CheckExecutable(r->spec.job_id, r->spec.argv, r->spec.binary_hash);
      if (!s.ok()) {
        LOG_WARN("skipping actor record " + records::EscapeUtf8(key) + ": " + s.message());
        continue;
      }
    }
    ActorEntry a;
    a.spec = std::move(r->spec);
    a.state = r->state;
    a.incarnation = r->incarnation;
    a.restarts_used = r->restarts_used;
    a.kill_requested = r->kill_requested;
    a.death_cause = r->death_cause;
    a.death_kind = proto::ErrorKindFromName(r->death_kind);
    a.subscribers.insert(r->subscribers.begin(), r->subscribers.end());
    a.node = r->node_id.empty() ? -1 : nodes_.IndexOfHex(r->node_id);
    a.bundle = r->bundle;
    a.address = r->address;
    a.pid = r->pid;
    a.end_time = r->end_time;
    Adopt(std::move(a), now);
  }
}

}  // namespace orrery::scheduler
