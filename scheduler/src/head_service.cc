#include "scheduler/src/head_service.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/src/clock.h"
#include "core/src/log.h"
#include "orrery/resources.h"
#include "scheduler/src/head_internal.h"
#include "scheduler/src/records.h"

namespace orrery::scheduler {

using proto::MsgType;

namespace {
constexpr const char* kLeftCleanly = "the node left the cluster";
}  // namespace

HeadService::HeadService(HeadOptions options) : options_(std::move(options)) {
  if (!options_.store) options_.store = std::make_shared<InMemoryStateStore>();
  if (options_.binary_dir.empty()) {
    const char* t = std::getenv("ORRERY_TMPDIR");
    options_.binary_dir = std::string(t && *t ? t : "/tmp/orrery") + "/head_binaries";
  }
}

HeadService::~HeadService() { Stop(); }

Status HeadService::Start() {
  Recover();
  inbox_.SetMaxMessageBytes(options_.max_message_bytes);
  Status s = inbox_.Bind(options_.bind_host, options_.port, options_.advertise_host);
  if (!s.ok()) return s;
  inbox_.SetTick(100, [this] { Tick(); });
  inbox_.Start([this](transport::Envelope& env) { Handle(env); }, "orrery-head");
  LOG_INFO("head listening on " + inbox_.address());
  return Status::Ok();
}

void HeadService::Stop() { inbox_.Stop(); }

void HeadService::Handle(transport::Envelope& env) {
  switch (env.type) {
    case MsgType::kRegisterNode:
      return OnRegisterNode(env);
    case MsgType::kCreateActor:
      return OnCreateActor(env);
    case MsgType::kSubscribeActor:
      return OnSubscribeActor(env);
    case MsgType::kGetNamedActor:
      return OnGetNamedActor(env);
    case MsgType::kKillActor:
      return OnKillActor(env);
    case MsgType::kRequestLease:
      return OnRequestLease(env);
    case MsgType::kReturnLease:
      return OnReturnLease(env);
    case MsgType::kCreatePlacementGroup:
      return OnCreatePg(env);
    case MsgType::kWaitPlacementGroup:
      return OnWaitPg(env);
    case MsgType::kRemovePlacementGroup:
      return OnRemovePg(env);
    case MsgType::kGetClusterInfo:
      return OnClusterInfo(env);
    case MsgType::kWorkerEvent:
      return OnWorkerEvent(env);
    case MsgType::kPing:
      return OnPing(env);
    case MsgType::kRegisterJob:
      return OnRegisterJob(env);
    case MsgType::kPutBinary:
      return OnPutBinary(env);
    case MsgType::kFetchBinary:
      return OnFetchBinary(env);
    case MsgType::kPutRecord:
      return OnPutRecord(env);
    default:
      throw std::runtime_error(std::string("the head does not handle ") +
                               proto::TypeName(env.type));
  }
}

void HeadService::ReplyAck(const std::string& to, uint64_t request_id, bool ok,
                           const std::string& kind, const std::string& message) {
  if (to.empty()) return;
  transport::Send(to, MsgType::kAck, proto::AckMsg{request_id, ok, kind, message});
}

void HeadService::OnPing(const transport::Envelope& env) {
  proto::PingMsg m;
  DECODE_OR_THROW(env, m);
  if (!m.reply_to.empty()) transport::Send(m.reply_to, MsgType::kPong, m);
}

// ------------------------------------------------------------------ nodes

void HeadService::OnRegisterNode(const transport::Envelope& env) {
  proto::RegisterNodeMsg m;
  DECODE_OR_THROW(env, m);
  NodeId id(UniqueId::FromBinary(m.node.node_id));
  // Only the node itself may register, heartbeat or say goodbye for its id.
  if (!FromNode(id.Binary(), m.node_secret, m.node.alive ? "registration" : "goodbye",
                m.node.alive))
    return;
  size_t i = 0;
  for (; i < nodes_.size(); ++i)
    if (nodes_[i].id == id) break;
  if (!m.node.alive) {  // a clean exit: dead at once
    if (i < nodes_.size() && nodes_[i].alive) MarkNodeDead(i, kLeftCleanly);
    return;
  }
  // The node's memory (as the peer says: clamped to what can be true); its record is
  // rewritten when the reading moved by 1% of the total.
  int64_t total = std::max<int64_t>(0, m.node.memory_total_bytes);
  int64_t used = std::clamp<int64_t>(m.node.memory_used_bytes, 0, total);
  double threshold = std::isfinite(m.node.memory_usage_threshold)
                         ? std::clamp(m.node.memory_usage_threshold, 0.0, 1.0)
                         : 0.0;
  NodeMemory& mem = node_memory_[id.Binary()];
  bool memory_moved = mem.written_used < 0 || mem.total != total || mem.threshold != threshold ||
                      std::abs(double(used) - double(mem.written_used)) >= 0.01 * double(total);
  mem.used = used;
  mem.total = total;
  mem.threshold = threshold;
  if (i < nodes_.size() && nodes_[i].alive) {  // a heartbeat
    node_last_seen_[i] = Now();
    if (memory_moved) PersistNode(i);
    ReplyAck(m.reply_to, 0, true, "", "");
    return;
  }
  Status valid = records::CheckUtf8("the node's", m.node.labels);
  if (valid.ok()) valid = records::CheckUtf8("the node's", m.node.total);
  if (valid.ok()) valid = records::CheckUtf8("the node's address", m.node.address);
  if (!valid.ok()) {
    LOG_WARN("refused to register node " + id.Hex() + ": " + valid.message());
    ReplyAck(m.reply_to, 0, false, "ConfigError", valid.message());
    return;
  }
  if (i == nodes_.size()) {
    nodes_.push_back({});
    node_addresses_.push_back({});
    node_last_seen_.push_back(0);
  }
  nodes_[i] = NodeView{id, true, m.node.total, m.node.total, m.node.labels};
  node_addresses_[i] = m.node.address;
  node_last_seen_[i] = Now();
  LOG_INFO("node " + id.Hex() + " registered at " + m.node.address + " with " +
           ToString(m.node.total));
  PersistNode(i);
  ReplyAck(m.reply_to, 0, true, "", "");
  ScheduleAll();
}

ClusterView HeadService::View() const { return nodes_; }

void HeadService::OnClusterInfo(const transport::Envelope& env) {
  proto::ClusterInfoMsg m;
  DECODE_OR_THROW(env, m);
  proto::ClusterInfoMsg reply{m.request_id, "", {}};
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const auto& n = nodes_[i];
    const NodeMemory& mem = node_memory_[n.id.Binary()];
    reply.nodes.push_back({n.id.Binary(), node_addresses_[i], n.alive, n.total, n.available,
                           n.labels, mem.used, mem.total, mem.threshold});
  }
  transport::Send(m.reply_to, MsgType::kClusterInfoReply, reply);
}

// ------------------------------------------------------------------ actors

void HeadService::OnCreateActor(const transport::Envelope& env) {
  proto::CreateActorMsg m;
  DECODE_OR_THROW(env, m);
  if (actors_.count(m.spec.actor_id)) {  // a resent request: it was taken already
    ReplyAck(m.reply_to, m.request_id, true, "", "");
    return;
  }
  auto& opts = m.spec.options;
  if (m.spec.actor_id.size() != UniqueId::kSize) {
    return ReplyAck(m.reply_to, m.request_id, false, "ConfigError", "an actor id has 16 bytes");
  }
  if (Status s = records::CheckActorSpec(m.spec); !s.ok()) {
    return ReplyAck(m.reply_to, m.request_id, false, "ConfigError", s.message());
  }
  if (Status s = CheckExecutable(m.spec.job_id, m.spec.argv, m.spec.binary_hash); !s.ok()) {
    LOG_WARN("refused to create an actor: " + s.message());
    return ReplyAck(m.reply_to, m.request_id, false, "ConfigError", s.message());
  }
  if (!opts.name.empty()) {
    auto key = std::make_pair(opts.namespace_, opts.name);
    auto it = named_.find(key);
    if (it != named_.end()) {
      auto a = actors_.find(it->second);
      if (a != actors_.end() && a->second.state != proto::ActorState::kDead) {
        ReplyAck(m.reply_to, m.request_id, false, "Error",
                 "an actor named '" + opts.name + "' already exists in namespace '" +
                     opts.namespace_ + "'");
        return;
      }
    }
    named_[key] = m.spec.actor_id;
  }
  ActorRec& a = actors_[m.spec.actor_id];
  a.spec = m.spec;
  a.subscribers.insert(m.spec.owner);
  pending_.push_back({PendingKind::kActor, m.spec.actor_id, Now()});
  PersistActor(a);
  ReplyAck(m.reply_to, m.request_id, true, "", "");
  ScheduleAll();
}

proto::ActorUpdateMsg HeadService::UpdateOf(const ActorRec& a) const {
  proto::ActorUpdateMsg u;
  u.actor_id = a.spec.actor_id;
  u.state = int(a.state);
  u.address = a.address;
  u.incarnation = a.incarnation;
  u.death_kind = a.death_kind;
  u.death_cause = a.death_cause;
  u.node_id = a.node >= 0 ? nodes_[a.node].id.Binary() : std::string();
  u.pid = a.pid;
  return u;
}

void HeadService::Notify(const ActorRec& a) {
  proto::ActorUpdateMsg u = UpdateOf(a);
  for (const auto& s : a.subscribers) transport::Send(s, MsgType::kActorUpdate, u);
}

void HeadService::OnSubscribeActor(const transport::Envelope& env) {
  proto::SubscribeActorMsg m;
  DECODE_OR_THROW(env, m);
  // Subscribers are stored in the actor's record: an address must be UTF-8 text.
  if (Status s = records::CheckUtf8("a subscriber address", m.reply_to); !s.ok())
    throw std::runtime_error(s.message());
  auto it = actors_.find(m.actor_id);
  if (it == actors_.end()) {
    proto::ActorUpdateMsg u;
    u.actor_id = m.actor_id;
    u.state = int(proto::ActorState::kDead);
    u.death_kind = "ActorDiedError";
    u.death_cause = "no actor with id " + Hex(m.actor_id) + " is known to the head";
    transport::Send(m.reply_to, MsgType::kActorUpdate, u);
    return;
  }
  it->second.subscribers.insert(m.reply_to);
  transport::Send(m.reply_to, MsgType::kActorUpdate, UpdateOf(it->second));
}

void HeadService::OnGetNamedActor(const transport::Envelope& env) {
  proto::NamedActorMsg m;
  DECODE_OR_THROW(env, m);
  auto it = named_.find({m.namespace_, m.name});
  m.actor_id.clear();
  if (it != named_.end()) {
    auto a = actors_.find(it->second);
    if (a != actors_.end() && a->second.state != proto::ActorState::kDead) m.actor_id = it->second;
  }
  transport::Send(m.reply_to, MsgType::kGetNamedActorReply, m);
}

void HeadService::OnKillActor(const transport::Envelope& env) {
  proto::KillActorMsg m;
  DECODE_OR_THROW(env, m);
  auto it = actors_.find(m.actor_id);
  if (it == actors_.end()) return;
  ActorRec& a = it->second;
  if (a.state == proto::ActorState::kDead) return;
  a.kill_requested = m.no_restart;
  if (a.node >= 0 && !a.address.empty()) {
    transport::Send(node_addresses_[a.node], MsgType::kKillWorker,
                    proto::KillWorkerMsg{a.spec.actor_id, "", "killed by orrery::Kill"});
    return;
  }
  if (a.node >= 0) {
    // Placed but not yet alive: the node kills the worker as soon as it can.
    transport::Send(node_addresses_[a.node], MsgType::kKillWorker,
                    proto::KillWorkerMsg{a.spec.actor_id, "", "killed by orrery::Kill"});
    return;
  }
  // Not placed: nothing runs; it dies here.
  ErasePending(PendingKind::kActor, m.actor_id);
  ActorDied(a, "ActorDiedError", "the actor was killed by orrery::Kill before it started", false);
}

void HeadService::ActorDied(ActorRec& a, const std::string& kind, const std::string& cause,
                            bool allow_restart) {
  if (a.node >= 0) {
    Release(a.node, a.spec.options.placement_group, a.bundle, a.spec.options.resources);
    a.node = -1;
    a.bundle = -1;
  }
  a.address.clear();
  a.pid = 0;
  int max = a.spec.options.max_restarts;
  if (allow_restart && !a.kill_requested && (max < 0 || a.restarts_used < max)) {
    ++a.restarts_used;
    ++a.incarnation;
    a.state = proto::ActorState::kRestarting;
    a.death_kind = kind;  // of the last death: callers of the lost calls get this kind
    a.death_cause = cause;
    LOG_INFO("actor " + Hex(a.spec.actor_id) + " restarting (" + std::to_string(a.restarts_used) +
             "/" + std::to_string(max) + "): " + cause);
    pending_.push_back({PendingKind::kActor, a.spec.actor_id, Now()});
    PersistActor(a);
    Notify(a);
    return;
  }
  a.state = proto::ActorState::kDead;
  a.death_kind = kind;
  a.death_cause = cause;
  LOG_INFO("actor " + Hex(a.spec.actor_id) + " is dead: " + cause);
  if (!a.spec.options.name.empty()) {
    auto it = named_.find({a.spec.options.namespace_, a.spec.options.name});
    if (it != named_.end() && it->second == a.spec.actor_id) named_.erase(it);
  }
  PersistActor(a);
  Notify(a);
}

void HeadService::OnWorkerEvent(const transport::Envelope& env) {
  proto::WorkerEventMsg m;
  DECODE_OR_THROW(env, m);
  // Only a node's own events count, and only for the actors and leases placed on it.
  int node = -1;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].id.Binary() == m.node_id) node = int(i);
  if (node < 0 || !FromNode(m.node_id, m.node_secret, "worker event", false)) return;
  m.cause = records::EscapeUtf8(m.cause);  // error text: any bytes, kept escaped
  m.address = records::EscapeUtf8(m.address);
  switch (proto::WorkerEventKind(m.kind)) {
    case proto::WorkerEventKind::kActorAlive: {
      auto it = actors_.find(m.actor_id);
      if (it == actors_.end() || it->second.incarnation != m.incarnation || it->second.node != node)
        return;
      ActorRec& a = it->second;
      a.state = proto::ActorState::kAlive;
      a.address = m.address;
      a.pid = m.pid;
      PersistActor(a);
      Notify(a);
      return;
    }
    case proto::WorkerEventKind::kActorDied: {
      auto it = actors_.find(m.actor_id);
      if (it == actors_.end() || it->second.incarnation != m.incarnation || it->second.node != node)
        return;
      if (it->second.state == proto::ActorState::kDead) return;
      bool creation_failed = m.error_kind == "CreationFailed";
      // The kinds a node reports that callers see as such; anything else is ActorDiedError.
      std::string kind = m.error_kind == "OutOfMemoryError" ? m.error_kind : "ActorDiedError";
      ActorDied(it->second, kind, m.cause, !creation_failed);
      ScheduleAll();
      return;
    }
    case proto::WorkerEventKind::kLeaseWorkerDied:
    case proto::WorkerEventKind::kLeaseFailed: {
      auto it = leases_.find(m.lease_id);
      if (it == leases_.end() || it->second.node != node) return;
      Release(it->second.node, it->second.request.placement_group, it->second.bundle,
              it->second.request.resources);
      ForgetLease(it->first);
      leases_.erase(it);
      ScheduleAll();
      return;
    }
  }
}

// ------------------------------------------------------------------ leases

void HeadService::OnRequestLease(const transport::Envelope& env) {
  proto::LeaseRequestMsg m;
  DECODE_OR_THROW(env, m);
  if (leases_.count(m.lease_id)) return;  // a resent request: it is queued or granted already
  Status valid = m.lease_id.size() == UniqueId::kSize
                     ? Status::Ok()
                     : Status::InvalidArgument("a lease id has 16 bytes");
  if (valid.ok()) valid = records::CheckUtf8("the task's", m.resources);
  if (valid.ok()) valid = records::CheckUtf8("the task's selector", m.label_selector);
  if (valid.ok()) valid = CheckExecutable(m.job_id, m.argv, m.binary_hash);
  if (!valid.ok()) {
    if (valid.code() == StatusCode::kPermissionDenied)
      LOG_WARN("refused a lease: " + valid.message());
    proto::LeaseReplyMsg reply;
    reply.request_id = m.request_id;
    reply.lease_id = m.lease_id;
    reply.ok = false;
    reply.error_kind = "ConfigError";
    reply.message = valid.message();
    transport::Send(m.reply_to, MsgType::kLeaseReply, reply);
    return;
  }
  LeaseRec& l = leases_[m.lease_id];
  l.request = m;
  pending_.push_back({PendingKind::kLease, m.lease_id, Now()});
  PersistLease(m.lease_id);  // a restarted head still knows it (docs/redis-schema.md "leases")
  ScheduleAll();
}

void HeadService::OnReturnLease(const transport::Envelope& env) {
  proto::ReturnLeaseMsg m;
  DECODE_OR_THROW(env, m);
  auto it = leases_.find(m.lease_id);
  if (it == leases_.end()) return;
  LeaseRec& l = it->second;
  if (l.node < 0) {
    // Still pending: cancel it.
    ErasePending(PendingKind::kLease, m.lease_id);
  } else {
    Release(l.node, l.request.placement_group, l.bundle, l.request.resources);
    transport::Send(node_addresses_[l.node], MsgType::kReleaseLease,
                    proto::ReleaseLeaseMsg{m.lease_id});
  }
  ForgetLease(m.lease_id);
  leases_.erase(it);
  ScheduleAll();
}

// ------------------------------------------------------------------ scheduling

void HeadService::Release(int node, const std::string& pg_id, int bundle, const Resources& demand) {
  if (!pg_id.empty()) {
    auto it = pgs_.find(pg_id);
    if (it == pgs_.end() || bundle < 0) return;
    PgRec& pg = it->second;
    if (pg.state == PgRec::kCreated) {
      Add(pg.bundle_available[bundle], demand);
    } else if (pg.state == PgRec::kRemoved && bundle < int(pg.node_of_bundle.size())) {
      // The group is gone: what this actor or lease held goes back to the node now.
      int n = pg.node_of_bundle[bundle];
      if (n >= 0 && n < int(nodes_.size())) Add(nodes_[n].available, demand);
    }
    return;
  }
  if (node >= 0 && node < int(nodes_.size())) Add(nodes_[node].available, demand);
}

Decision HeadService::PlaceInBundle(PgRec& pg, int bundle_index, const Resources& demand,
                                    int* bundle_out) {
  if (pg.state == PgRec::kRemoved)
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
    if (pg.state == PgRec::kCreated && Fits(demand, pg.bundle_available[b])) {
      *bundle_out = b;
      return {Outcome::kPlaced, pg.node_of_bundle[b], ""};
    }
  }
  if (!feasible) {
    return {Outcome::kInfeasible, -1,
            "no bundle of placement group '" + pg.spec.name + "' can hold " + ToString(demand)};
  }
  return {Outcome::kWait, -1,
          pg.state == PgRec::kPending ? "waiting for its placement group to be placed"
                                      : "waiting for room in its placement group bundle"};
}

Decision HeadService::PlaceAndReserve(const Resources& resources, const Labels& selector,
                                      int strategy, const std::string& affinity_node,
                                      bool affinity_soft, const std::string& pg_id,
                                      int bundle_index, int* bundle) {
  Decision d;
  *bundle = -1;
  if (!pg_id.empty()) {
    auto it = pgs_.find(pg_id);
    d = it == pgs_.end() ? Decision{Outcome::kInfeasible, -1, "its placement group does not exist"}
                         : PlaceInBundle(it->second, bundle_index, resources, bundle);
  } else {
    Demand demand{resources, selector, SchedulingStrategy(strategy),
                  NodeId(UniqueId::FromBinary(affinity_node)), affinity_soft};
    d = Schedule(demand, nodes_, round_robin_++);
  }
  if (d.outcome == Outcome::kPlaced) {
    Subtract(*bundle >= 0 ? pgs_[pg_id].bundle_available[*bundle] : nodes_[d.node_index].available,
             resources);
  } else {
    wait_reason_ = (d.outcome == Outcome::kInfeasible ? "infeasible: " : "") + d.reason;
  }
  return d;
}

bool HeadService::TryPlaceActor(ActorRec& a, const Pending& p, double now) {
  if (a.state == proto::ActorState::kDead) return true;
  const auto& o = a.spec.options;
  Decision d = PlaceAndReserve(o.resources, o.label_selector, o.strategy, o.affinity_node,
                               o.affinity_soft, o.placement_group, o.bundle_index, &a.bundle);
  if (d.outcome == Outcome::kPlaced) {
    a.node = d.node_index;
    PersistActor(a);  // a head restarted from here on knows it is placed: no second start
    transport::Send(node_addresses_[a.node], MsgType::kStartActor,
                    proto::StartActorMsg{a.spec, a.incarnation});
    return true;
  }
  double limit = a.spec.infeasible_timeout_s;
  if (d.outcome == Outcome::kInfeasible && limit >= 0 && now - p.since >= limit) {
    ActorDied(a, "InfeasibleError", "actor " + a.spec.factory + " cannot be scheduled: " + d.reason,
              false);
    return true;
  }
  return false;
}

bool HeadService::TryPlaceLease(LeaseRec& l, const Pending& p, double now) {
  const auto& r = l.request;
  Decision d = PlaceAndReserve(r.resources, r.label_selector, r.strategy, r.affinity_node,
                               r.affinity_soft, r.placement_group, r.bundle_index, &l.bundle);
  if (d.outcome == Outcome::kPlaced) {
    l.node = d.node_index;
    PersistLease(r.lease_id);
    transport::Send(node_addresses_[l.node], MsgType::kGrantLease, proto::GrantLeaseMsg{r});
    return true;
  }
  if (d.outcome == Outcome::kInfeasible && r.infeasible_timeout_s >= 0 &&
      now - p.since >= r.infeasible_timeout_s) {
    proto::LeaseReplyMsg reply;
    reply.request_id = r.request_id;
    reply.lease_id = r.lease_id;
    reply.ok = false;
    reply.error_kind = "InfeasibleError";
    reply.message = "task cannot be scheduled: " + d.reason;
    transport::Send(r.reply_to, MsgType::kLeaseReply, reply);
    std::string lease_id = r.lease_id;  // `r` lives in the erased record
    ForgetLease(lease_id);
    leases_.erase(lease_id);
    return true;
  }
  return false;
}

bool HeadService::TryPlacePg(PgRec& pg) {
  if (pg.state != PgRec::kPending) return true;
  BundleDecision d = PlaceBundles(pg.spec.bundles, PlacementStrategy(pg.spec.strategy), nodes_,
                                  pg.spec.same_label, pg.spec.label_selector);
  if (d.outcome != Outcome::kPlaced) {
    pg.reason = d.reason;
    wait_reason_ = d.reason;
    return false;  // placement groups stay pending until removed
  }
  pg.state = PgRec::kCreated;
  pg.node_of_bundle = d.node_of_bundle;
  pg.bundle_available = pg.spec.bundles;
  for (size_t b = 0; b < pg.spec.bundles.size(); ++b)
    Subtract(nodes_[d.node_of_bundle[b]].available, pg.spec.bundles[b]);
  pg.reason.clear();
  for (const auto& w : pg.waiters) ReplyPg(w.reply_to, w.request_id, &pg, true, "", "");
  pg.waiters.clear();
  PersistPg(pg);
  return true;
}

void HeadService::ErasePending(PendingKind kind, const std::string& id) {
  for (auto p = pending_.begin(); p != pending_.end(); ++p) {
    if (p->kind == kind && p->id == id) {
      if (!p->reason.empty()) options_.store->Delete("pending", Hex(id));
      pending_.erase(p);
      return;
    }
  }
}

void HeadService::ScheduleAll() {
  double now = Now();
  for (auto it = pending_.begin(); it != pending_.end();) {
    bool done = true;
    switch (it->kind) {
      case PendingKind::kActor: {
        auto a = actors_.find(it->id);
        done = a == actors_.end() || TryPlaceActor(a->second, *it, now);
        break;
      }
      case PendingKind::kLease: {
        auto l = leases_.find(it->id);
        done = l == leases_.end() || TryPlaceLease(l->second, *it, now);
        break;
      }
      case PendingKind::kPg: {
        auto pg = pgs_.find(it->id);
        done = pg == pgs_.end() || TryPlacePg(pg->second);
        break;
      }
    }
    if (done) {
      if (!it->reason.empty()) options_.store->Delete("pending", Hex(it->id));
      it = pending_.erase(it);
      continue;
    }
    if (wait_reason_ != it->reason) {  // written only when it changes, not every tick
      it->reason = wait_reason_;
      static const char* kKinds[] = {"actor", "task", "placement_group"};
      std::string what;
      if (it->kind == PendingKind::kActor)
        what =
            actors_[it->id].spec.factory + " " + ToString(actors_[it->id].spec.options.resources);
      if (it->kind == PendingKind::kLease)
        what = "tasks needing " + ToString(leases_[it->id].request.resources);
      if (it->kind == PendingKind::kPg) what = "placement group '" + pgs_[it->id].spec.name + "'";
      nlohmann::json j{{"id", Hex(it->id)},
                       {"kind", kKinds[int(it->kind)]},
                       {"demand", what},
                       {"reason", it->reason},
                       {"waiting_s", now - it->since}};
      options_.store->Put("pending", Hex(it->id), records::Dump(j));
    }
    ++it;
  }
}

void HeadService::MarkNodeDead(size_t i, const std::string& cause) {
  NodeView& n = nodes_[i];
  n.alive = false;
  if (cause == kLeftCleanly) {
    LOG_INFO("node " + n.id.Hex() + " left the cluster");
  } else {
    LOG_WARN("node " + n.id.Hex() + " is dead: " + cause);
  }
  for (auto& [id, a] : actors_) {
    if (a.node == int(i) && a.state != proto::ActorState::kDead) {
      ActorDied(a, "ActorDiedError", "its node " + n.id.Hex() + " died: " + cause, true);
    }
  }
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.node != int(i)) {
      ++it;
      continue;
    }
    proto::LeaseReplyMsg r;
    r.lease_id = it->first;
    r.ok = false;
    r.error_kind = "WorkerDied";
    r.message = "its node " + n.id.Hex() + " died: " + cause;
    transport::Send(it->second.request.reply_to, MsgType::kLeaseReply, r);
    ForgetLease(it->first);
    it = leases_.erase(it);
  }
  n.available = n.total;  // nothing runs there any more; it is skipped as dead
  PersistNode(i);
  ScheduleAll();
}

void HeadService::Tick() {
  ScheduleAll();
  double now = Now();
  double limit = options_.health_check_period_s * options_.health_check_failure_threshold;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].alive && now - node_last_seen_[i] > limit) {
      MarkNodeDead(i, "no heartbeat for " + std::to_string(int(now - node_last_seen_[i])) + " s");
    }
  }
  std::vector<std::string> silent;
  for (const auto& [id, j] : jobs_)
    if (j.alive && now - j.last_seen > std::max(limit, kJobTimeoutS)) silent.push_back(id);
  for (const auto& id : silent) JobDied(id, "the driver stopped sending heartbeats (it died)");
  for (auto& [id, pg] : pgs_) {
    for (auto w = pg.waiters.begin(); w != pg.waiters.end();) {
      if (w->deadline >= 0 && now >= w->deadline) {
        ReplyPg(w->reply_to, w->request_id, &pg, true, "", "");
        w = pg.waiters.erase(w);
      } else {
        ++w;
      }
    }
  }
}

}  // namespace orrery::scheduler
