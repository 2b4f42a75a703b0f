#include "scheduler/src/head_service.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/src/clock.h"
#include "core/src/file_hash.h"
#include "core/src/log.h"
#include "orrery/resources.h"

namespace orrery::scheduler {

using proto::MsgType;

namespace {
// Binary blobs (msgpack specs) are stored hex-encoded inside the JSON records.
std::string UniqueIdHexBytes(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(d[c >> 4]);
    out.push_back(d[c & 15]);
  }
  return out;
}

std::string FromHexBytes(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// Drivers heartbeat every second; a driver silent this long is gone.
constexpr double kJobTimeoutS = 5.0;
constexpr int kDetachedLifetime = 1;
constexpr const char* kLeftCleanly = "the node left the cluster";  // ActorOptionsMsg::lifetime of a detached actor

// "Counter::Create" -> "Counter": the class an actor factory makes.
std::string ClassOf(const std::string& factory) {
  size_t colon = factory.rfind("::");
  return colon == std::string::npos ? factory : factory.substr(0, colon);
}

double Now() { return MonotonicSeconds(); }
std::string Hex(const std::string& binary_id) { return UniqueId::FromBinary(binary_id).Hex(); }
const char* StateName(proto::ActorState s) {
  switch (s) {
    case proto::ActorState::kPending: return "PENDING";
    case proto::ActorState::kAlive: return "ALIVE";
    case proto::ActorState::kRestarting: return "RESTARTING";
    case proto::ActorState::kDead: return "DEAD";
  }
  return "UNKNOWN";
}
}  // namespace

HeadService::HeadService(HeadOptions options) : options_(std::move(options)) {
  if (!options_.store) options_.store = std::make_shared<InMemoryStateStore>();
  if (options_.binary_dir.empty()) {
    const char* t = std::getenv("ORRERY_TMPDIR");
    options_.binary_dir = std::string(t && *t ? t : "/tmp/orrery") + "/head_binaries";
  }
}

HeadService::~HeadService() { Stop(); }

void HeadService::Recover() {
  double now = Now();
  // Pending records describe the previous head's queue; this head writes its own.
  for (const auto& [id, text] : options_.store->GetAll("pending")) options_.store->Delete("pending", id);
  for (const auto& [id, text] : options_.store->GetAll("nodes")) {
    try {
      auto j = nlohmann::json::parse(text);
      NodeView n{NodeId::FromHex(j.at("node_id")), j.value("alive", false), j.at("total").get<Resources>(),
                 j.at("total").get<Resources>(), j.value("labels", Labels{})};
      if (!n.alive) n.available.clear();
      nodes_.push_back(n);
      auto number = [&](const char* key, double max) {  // 0 unless a number in [0, max]
        auto it = j.find(key);
        double v = it != j.end() && it->is_number() ? it->get<double>() : 0.0;
        return std::isfinite(v) ? std::clamp(v, 0.0, max) : 0.0;
      };
      node_memory_[n.id.Binary()] = {int64_t(number("memory_used_bytes", 9e18)), int64_t(number("memory_total_bytes", 9e18)),
                                     number("memory_usage_threshold", 1.0)};
      node_addresses_.push_back(j.value("address", ""));
      node_last_seen_.push_back(now);  // a full grace period to send a heartbeat
    } catch (const std::exception& e) {
      LOG_WARN("skipping an unreadable node record " + id + ": " + e.what());
    }
  }
  auto node_index = [&](const std::string& hex) {
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i].id.Hex() == hex) return int(i);
    return -1;
  };
  for (const auto& [id, text] : options_.store->GetAll("placement_groups")) {
    try {
      auto j = nlohmann::json::parse(text);
      PgRec pg;
      pg.spec = internal::Unpack<proto::PlacementGroupMsg>(FromHexBytes(j.at("spec")), "placement group");
      std::string state = j.value("state", "PENDING");
      if (state == "REMOVED") continue;
      if (state == "CREATED") {
        pg.state = PgRec::kCreated;
        pg.bundle_available = pg.spec.bundles;
        for (const auto& hex : j.at("bundle_nodes")) pg.node_of_bundle.push_back(node_index(hex.get<std::string>()));
        for (size_t b = 0; b < pg.node_of_bundle.size(); ++b) {
          if (pg.node_of_bundle[b] >= 0) Subtract(nodes_[pg.node_of_bundle[b]].available, pg.spec.bundles[b]);
        }
      } else {
        pending_.push_back({PendingKind::kPg, pg.spec.pg_id, now});
      }
      if (!pg.spec.name.empty()) pg_names_[pg.spec.name] = pg.spec.pg_id;
      pgs_[pg.spec.pg_id] = std::move(pg);
    } catch (const std::exception& e) {
      LOG_WARN("skipping an unreadable placement group record " + id + ": " + e.what());
    }
  }
  for (const auto& [id, text] : options_.store->GetAll("actors")) {
    try {
      auto j = nlohmann::json::parse(text);
      ActorRec a;
      a.spec = internal::Unpack<proto::ActorSpecMsg>(FromHexBytes(j.at("spec")), "actor");
      std::string state = j.value("state", "PENDING");
      a.incarnation = j.value("incarnation", 0);
      a.restarts_used = j.value("restarts", 0);
      a.kill_requested = j.value("kill_requested", false);
      a.death_cause = j.value("death_cause", "");
      a.death_kind = j.value("death_kind", "");
      for (const auto& sub : j.value("subscribers", nlohmann::json::array())) a.subscribers.insert(sub.get<std::string>());
      a.node = node_index(j.value("node_id", ""));
      a.bundle = j.value("bundle", -1);
      a.address = j.value("address", "");
      a.pid = j.value("pid", 0);
      if (state == "DEAD") {
        a.state = proto::ActorState::kDead;
        if (a.death_kind.empty()) a.death_kind = "ActorDiedError";
        a.node = -1;
      } else {
        a.state = state == "ALIVE" ? proto::ActorState::kAlive
                                   : (state == "RESTARTING" ? proto::ActorState::kRestarting : proto::ActorState::kPending);
        if (a.node >= 0) {
          // Placed before the restart: it still holds its resources.
          const auto& o = a.spec.options;
          auto pg = pgs_.find(o.placement_group);
          if (!o.placement_group.empty() && pg != pgs_.end() && a.bundle >= 0 &&
              a.bundle < int(pg->second.bundle_available.size())) {
            Subtract(pg->second.bundle_available[a.bundle], o.resources);
          } else {
            Subtract(nodes_[a.node].available, o.resources);
          }
        } else {
          pending_.push_back({PendingKind::kActor, a.spec.actor_id, now});
        }
        if (!a.spec.options.name.empty()) named_[{a.spec.options.namespace_, a.spec.options.name}] = a.spec.actor_id;
      }
      actors_[a.spec.actor_id] = std::move(a);
    } catch (const std::exception& e) {
      LOG_WARN("skipping an unreadable actor record " + id + ": " + e.what());
    }
  }
  for (const auto& [id, text] : options_.store->GetAll("jobs")) {
    try {
      auto j = nlohmann::json::parse(text);
      JobRec rec;
      rec.info.job_id = UniqueId::FromHex(j.at("job_id")).Binary();
      rec.info.driver_address = j.value("driver_address", "");
      rec.info.pid = j.value("pid", 0);
      rec.info.namespace_ = j.value("namespace", "");
      rec.info.entrypoint = j.value("entrypoint", "");
      rec.alive = j.value("state", "") == "RUNNING";
      rec.start_time = j.value("start_time", 0.0);
      rec.end_cause = j.value("end_cause", "");
      rec.last_seen = now;  // a grace period for its driver to reconnect
      jobs_[rec.info.job_id] = rec;
    } catch (const std::exception& e) {
      LOG_WARN("skipping an unreadable job record " + id + ": " + e.what());
    }
  }
  if (!nodes_.empty() || !actors_.empty() || !pgs_.empty()) {
    LOG_INFO("recovered " + std::to_string(nodes_.size()) + " nodes, " + std::to_string(actors_.size()) + " actors and " +
             std::to_string(pgs_.size()) + " placement groups from the state store");
  }
}

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
    case MsgType::kRegisterNode: return OnRegisterNode(env);
    case MsgType::kCreateActor: return OnCreateActor(env);
    case MsgType::kSubscribeActor: return OnSubscribeActor(env);
    case MsgType::kGetNamedActor: return OnGetNamedActor(env);
    case MsgType::kKillActor: return OnKillActor(env);
    case MsgType::kRequestLease: return OnRequestLease(env);
    case MsgType::kReturnLease: return OnReturnLease(env);
    case MsgType::kCreatePlacementGroup: return OnCreatePg(env);
    case MsgType::kWaitPlacementGroup: return OnWaitPg(env);
    case MsgType::kRemovePlacementGroup: return OnRemovePg(env);
    case MsgType::kGetClusterInfo: return OnClusterInfo(env);
    case MsgType::kWorkerEvent: return OnWorkerEvent(env);
    case MsgType::kPing: return OnPing(env);
    case MsgType::kRegisterJob: return OnRegisterJob(env);
    case MsgType::kPutBinary: return OnPutBinary(env);
    case MsgType::kFetchBinary: return OnFetchBinary(env);
    case MsgType::kPutRecord: return OnPutRecord(env);
    default:
      throw std::runtime_error(std::string("the head does not handle ") + proto::TypeName(env.type));
  }
}

// Decodes or throws (the inbox answers a thrown error with kError and keeps serving).
#define DECODE_OR_THROW(env, msg)                                                         \
  do {                                                                                    \
    Status s_ = (env).Decode(&(msg));                                                     \
    if (!s_.ok()) throw std::runtime_error(s_.message());                                 \
  } while (0)

void HeadService::ReplyAck(const std::string& to, uint64_t request_id, bool ok, const std::string& kind,
                           const std::string& message) {
  if (to.empty()) return;
  transport::Send(to, MsgType::kAck, proto::AckMsg{request_id, ok, kind, message});
}

void HeadService::OnPing(const transport::Envelope& env) {
  proto::PingMsg m;
  DECODE_OR_THROW(env, m);
  if (!m.reply_to.empty()) transport::Send(m.reply_to, MsgType::kPong, m);
}

// ------------------------------------------------------------------ jobs

void HeadService::OnRegisterJob(const transport::Envelope& env) {
  proto::JobMsg m;
  DECODE_OR_THROW(env, m);
  auto it = jobs_.find(m.job_id);
  if (!m.alive) {
    if (it != jobs_.end() && it->second.alive) JobDied(m.job_id, "the driver shut down");
    return;
  }
  if (it != jobs_.end()) {  // a heartbeat, or a resent registration
    if (it->second.alive) it->second.last_seen = Now();
    ReplyAck(m.reply_to, m.request_id, true, "", "");
    return;
  }
  if (!m.binary_hash.empty() && access(BinaryPath(m.binary_hash).c_str(), R_OK) != 0) {
    // Nodes may need this executable: ask the driver for it before the job starts.
    ReplyAck(m.reply_to, m.request_id, false, "NeedBinary", "upload " + m.binary_hash);
    return;
  }
  JobRec& j = jobs_[m.job_id];
  j.info = m;
  j.last_seen = Now();
  j.start_time = double(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count()) / 1000.0;
  LOG_INFO("job " + Hex(m.job_id) + " started by pid " + std::to_string(m.pid) + " (" + m.entrypoint + ")");
  PersistJob(m.job_id);
  ReplyAck(m.reply_to, m.request_id, true, "", "");
}

// ------------------------------------------------------------------ driver-written records

void HeadService::OnPutRecord(const transport::Envelope& env) {
  proto::RecordMsg m;
  DECODE_OR_THROW(env, m);
  // Drivers may write only the tables the head does not own itself.
  if (m.table != "train_runs") {
    return ReplyAck(m.reply_to, m.request_id, false, "Error", "the head keeps no driver records in table \"" + m.table + "\"");
  }
  bool key_ok = !m.key.empty() && m.key.size() <= 64;
  for (char c : m.key) key_ok = key_ok && std::isxdigit(static_cast<unsigned char>(c));
  if (!key_ok) return ReplyAck(m.reply_to, m.request_id, false, "Error", "a record key is 1 to 64 hex digits");
  nlohmann::json record, entry;
  try {
    if (!m.json.empty()) record = nlohmann::json::parse(m.json);
    if (m.stream_index >= 0) entry = nlohmann::json::parse(m.stream_json);
  } catch (const std::exception& e) {
    return ReplyAck(m.reply_to, m.request_id, false, "Error", std::string("a record must be JSON: ") + e.what());
  }
  if ((!m.json.empty() && !record.is_object()) || (m.stream_index >= 0 && !entry.is_object())) {
    return ReplyAck(m.reply_to, m.request_id, false, "Error", "a record and a stream entry must be JSON objects");
  }
  if (m.stream_index >= 0) {
    auto [it, fresh] = stream_written_.emplace(m.key, -1);
    if (m.stream_index > it->second) {  // a resent request appends nothing twice
      it->second = m.stream_index;
      StateStore::StreamEntry fields;
      for (auto& [k, v] : entry.items()) fields.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
      options_.store->StreamAdd("train:" + m.key + ":metrics", fields);
    }
  }
  if (!m.json.empty()) {
    options_.store->Put(m.table, m.key, m.json);
    Publish(m.table, m.key, record.value("status", ""));
  }
  ReplyAck(m.reply_to, m.request_id, true, "", "");
}

std::string HeadService::BinaryPath(const std::string& hash) const {
  for (char c : hash)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return "/nonexistent";
  return options_.binary_dir + "/" + hash;
}

void HeadService::OnPutBinary(const transport::Envelope& env) {
  proto::BinaryMsg m;
  DECODE_OR_THROW(env, m);
  std::string bytes = env.PayloadString();
  std::string got = HashBytes(bytes);
  if (got != m.hash) {
    return ReplyAck(m.reply_to, m.request_id, false, "Error", "the uploaded binary's hash is " + got + ", not " + m.hash);
  }
  std::error_code ec;
  std::filesystem::create_directories(options_.binary_dir, ec);
  std::string path = BinaryPath(m.hash), tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    if (!out) return ReplyAck(m.reply_to, m.request_id, false, "Error", "cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  LOG_INFO("stored a driver executable (" + std::to_string(bytes.size()) + " bytes) as " + path);
  ReplyAck(m.reply_to, m.request_id, !ec, ec ? "Error" : "", ec ? ec.message() : "");
}

void HeadService::OnFetchBinary(const transport::Envelope& env) {
  proto::BinaryMsg m;
  DECODE_OR_THROW(env, m);
  std::ifstream in(BinaryPath(m.hash), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  proto::BinaryMsg reply{m.request_id, "", m.hash, "", bool(in) || !bytes.empty(), ""};
  if (!reply.ok) reply.message = "the head has no executable with hash " + m.hash;
  transport::Send(m.reply_to, MsgType::kBinaryReply, reply, &bytes);
}

void HeadService::JobDied(const std::string& job_id, const std::string& cause) {
  JobRec& j = jobs_[job_id];
  j.alive = false;
  j.end_cause = cause;
  LOG_INFO("job " + Hex(job_id) + " ended: " + cause);
  for (auto& [id, a] : actors_) {
    if (a.spec.job_id != job_id || a.spec.options.lifetime == kDetachedLifetime) continue;
    if (a.state == proto::ActorState::kDead) continue;
    a.kill_requested = true;
    if (a.node >= 0) {
      transport::Send(node_addresses_[a.node], MsgType::kKillWorker,
                      proto::KillWorkerMsg{a.spec.actor_id, "", "its owner (job " + Hex(job_id) + ") is gone"});
    } else {
      ErasePending(PendingKind::kActor, id);
      ActorDied(a, "ActorDiedError", "its owner (job " + Hex(job_id) + ") is gone", false);
    }
  }
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.request.job_id != job_id) {
      ++it;
      continue;
    }
    if (it->second.node >= 0) {
      Release(it->second.node, it->second.request.placement_group, it->second.bundle, it->second.request.resources);
      transport::Send(node_addresses_[it->second.node], MsgType::kReleaseLease, proto::ReleaseLeaseMsg{it->first});
    } else {
      ErasePending(PendingKind::kLease, it->first);
    }
    it = leases_.erase(it);
  }
  PersistJob(job_id);
  ScheduleAll();
}

void HeadService::PersistJob(const std::string& job_id) {
  const JobRec& j = jobs_[job_id];
  nlohmann::json out{{"job_id", Hex(job_id)}, {"driver_address", j.info.driver_address}, {"pid", j.info.pid},
                     {"namespace", j.info.namespace_}, {"entrypoint", j.info.entrypoint},
                     {"state", j.alive ? "RUNNING" : "FINISHED"}, {"start_time", j.start_time},
                     {"end_cause", j.end_cause}};
  options_.store->Put("jobs", Hex(job_id), out.dump());
  Publish("jobs", Hex(job_id), j.alive ? "RUNNING" : "FINISHED");
}

// ------------------------------------------------------------------ nodes

void HeadService::OnRegisterNode(const transport::Envelope& env) {
  proto::RegisterNodeMsg m;
  DECODE_OR_THROW(env, m);
  NodeId id(UniqueId::FromBinary(m.node.node_id));
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
  double threshold = std::isfinite(m.node.memory_usage_threshold) ? std::clamp(m.node.memory_usage_threshold, 0.0, 1.0) : 0.0;
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
  if (i == nodes_.size()) {
    nodes_.push_back({});
    node_addresses_.push_back({});
    node_last_seen_.push_back(0);
  }
  nodes_[i] = NodeView{id, true, m.node.total, m.node.total, m.node.labels};
  node_addresses_[i] = m.node.address;
  node_last_seen_[i] = Now();
  LOG_INFO("node " + id.Hex() + " registered at " + m.node.address + " with " + ToString(m.node.total));
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
    reply.nodes.push_back({n.id.Binary(), node_addresses_[i], n.alive, n.total, n.available, n.labels, mem.used,
                           mem.total, mem.threshold});
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
  if (!opts.name.empty()) {
    auto key = std::make_pair(opts.namespace_, opts.name);
    auto it = named_.find(key);
    if (it != named_.end()) {
      auto a = actors_.find(it->second);
      if (a != actors_.end() && a->second.state != proto::ActorState::kDead) {
        ReplyAck(m.reply_to, m.request_id, false, "Error",
                 "an actor named '" + opts.name + "' already exists in namespace '" + opts.namespace_ + "'");
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

void HeadService::ActorDied(ActorRec& a, const std::string& kind, const std::string& cause, bool allow_restart) {
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
    LOG_INFO("actor " + Hex(a.spec.actor_id) + " restarting (" + std::to_string(a.restarts_used) + "/" +
             std::to_string(max) + "): " + cause);
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
  switch (proto::WorkerEventKind(m.kind)) {
    case proto::WorkerEventKind::kActorAlive: {
      auto it = actors_.find(m.actor_id);
      if (it == actors_.end() || it->second.incarnation != m.incarnation) return;
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
      if (it == actors_.end() || it->second.incarnation != m.incarnation) return;
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
      if (it == leases_.end()) return;
      Release(it->second.node, it->second.request.placement_group, it->second.bundle, it->second.request.resources);
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
  LeaseRec& l = leases_[m.lease_id];
  l.request = m;
  pending_.push_back({PendingKind::kLease, m.lease_id, Now()});
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
    transport::Send(node_addresses_[l.node], MsgType::kReleaseLease, proto::ReleaseLeaseMsg{m.lease_id});
  }
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

Decision HeadService::PlaceInBundle(PgRec& pg, int bundle_index, const Resources& demand, int* bundle_out) {
  if (pg.state == PgRec::kRemoved) return {Outcome::kInfeasible, -1, "its placement group was removed"};
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
  return {Outcome::kWait, -1, pg.state == PgRec::kPending ? "waiting for its placement group to be placed"
                                                          : "waiting for room in its placement group bundle"};
}

Decision HeadService::PlaceAndReserve(const Resources& resources, const Labels& selector, int strategy,
                                      const std::string& affinity_node, bool affinity_soft,
                                      const std::string& pg_id, int bundle_index, int* bundle) {
  Decision d;
  *bundle = -1;
  if (!pg_id.empty()) {
    auto it = pgs_.find(pg_id);
    d = it == pgs_.end() ? Decision{Outcome::kInfeasible, -1, "its placement group does not exist"}
                         : PlaceInBundle(it->second, bundle_index, resources, bundle);
  } else {
    Demand demand{resources, selector, SchedulingStrategy(strategy), NodeId(UniqueId::FromBinary(affinity_node)),
                  affinity_soft};
    d = Schedule(demand, nodes_, round_robin_++);
  }
  if (d.outcome == Outcome::kPlaced) {
    Subtract(*bundle >= 0 ? pgs_[pg_id].bundle_available[*bundle] : nodes_[d.node_index].available, resources);
  } else {
    wait_reason_ = (d.outcome == Outcome::kInfeasible ? "infeasible: " : "") + d.reason;
  }
  return d;
}

bool HeadService::TryPlaceActor(ActorRec& a, const Pending& p, double now) {
  if (a.state == proto::ActorState::kDead) return true;
  const auto& o = a.spec.options;
  Decision d = PlaceAndReserve(o.resources, o.label_selector, o.strategy, o.affinity_node, o.affinity_soft,
                               o.placement_group, o.bundle_index, &a.bundle);
  if (d.outcome == Outcome::kPlaced) {
    a.node = d.node_index;
    PersistActor(a);  // a head restarted from here on knows it is placed: no second start
    transport::Send(node_addresses_[a.node], MsgType::kStartActor, proto::StartActorMsg{a.spec, a.incarnation});
    return true;
  }
  double limit = a.spec.infeasible_timeout_s;
  if (d.outcome == Outcome::kInfeasible && limit >= 0 && now - p.since >= limit) {
    ActorDied(a, "InfeasibleError", "actor " + a.spec.factory + " cannot be scheduled: " + d.reason, false);
    return true;
  }
  return false;
}

bool HeadService::TryPlaceLease(LeaseRec& l, const Pending& p, double now) {
  const auto& r = l.request;
  Decision d = PlaceAndReserve(r.resources, r.label_selector, r.strategy, r.affinity_node, r.affinity_soft,
                               r.placement_group, r.bundle_index, &l.bundle);
  if (d.outcome == Outcome::kPlaced) {
    l.node = d.node_index;
    transport::Send(node_addresses_[l.node], MsgType::kGrantLease, proto::GrantLeaseMsg{r});
    return true;
  }
  if (d.outcome == Outcome::kInfeasible && r.infeasible_timeout_s >= 0 && now - p.since >= r.infeasible_timeout_s) {
    proto::LeaseReplyMsg reply;
    reply.request_id = r.request_id;
    reply.lease_id = r.lease_id;
    reply.ok = false;
    reply.error_kind = "InfeasibleError";
    reply.message = "task cannot be scheduled: " + d.reason;
    transport::Send(r.reply_to, MsgType::kLeaseReply, reply);
    leases_.erase(r.lease_id);
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
  for (size_t b = 0; b < pg.spec.bundles.size(); ++b) Subtract(nodes_[d.node_of_bundle[b]].available, pg.spec.bundles[b]);
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
      if (it->kind == PendingKind::kActor) what = actors_[it->id].spec.factory + " " + ToString(actors_[it->id].spec.options.resources);
      if (it->kind == PendingKind::kLease) what = "tasks needing " + ToString(leases_[it->id].request.resources);
      if (it->kind == PendingKind::kPg) what = "placement group '" + pgs_[it->id].spec.name + "'";
      nlohmann::json j{{"id", Hex(it->id)}, {"kind", kKinds[int(it->kind)]}, {"demand", what},
                       {"reason", it->reason}, {"waiting_s", now - it->since}};
      options_.store->Put("pending", Hex(it->id), j.dump());
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
  if (m.bundles.empty()) return ReplyPg(m.reply_to, m.request_id, nullptr, false, "ConfigError", "a placement group needs at least one bundle");
  if (auto known = pgs_.find(m.pg_id); known != pgs_.end()) {  // a resent request
    return ReplyPg(m.reply_to, m.request_id, &known->second, true, "", "");
  }
  if (m.strategy < 0 || m.strategy > 3) return ReplyPg(m.reply_to, m.request_id, nullptr, false, "ConfigError", "unknown placement strategy");
  for (const auto& b : m.bundles) {
    Status s = ValidateResources(b);
    if (!s.ok() || b.empty()) {
      return ReplyPg(m.reply_to, m.request_id, nullptr, false, "ConfigError",
                     "bad bundle " + ToString(b) + ": " + (b.empty() ? "a bundle must not be empty" : s.message()));
    }
  }
  if (!m.name.empty()) {
    auto it = pg_names_.find(m.name);
    if (it != pg_names_.end() && pgs_.count(it->second) && pgs_[it->second].state != PgRec::kRemoved) {
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
    return ReplyPg(m.reply_to, m.request_id, nullptr, false, "PlacementGroupError",
                   "no placement group " + (m.name.empty() ? Hex(m.pg_id) : "named '" + m.name + "'"));
  }
  PgRec& pg = it->second;
  if (pg.state == PgRec::kCreated || m.timeout_s == 0) return ReplyPg(m.reply_to, m.request_id, &pg, true, "", "");
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
    for (size_t b = 0; b < pg.spec.bundles.size(); ++b) Add(nodes_[pg.node_of_bundle[b]].available, pg.bundle_available[b]);
  }
  pg.state = PgRec::kRemoved;
  for (const auto& w : pg.waiters) ReplyPg(w.reply_to, w.request_id, &pg, false, "PlacementGroupError", "the placement group was removed");
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

// ------------------------------------------------------------------ persistence

void HeadService::Publish(const std::string& table, const std::string& id, const std::string& state) {
  nlohmann::json e{{"table", table}, {"id", id}, {"state", state}};
  options_.store->Publish(e.dump());
}

void HeadService::PersistNode(size_t i) {
  const auto& n = nodes_[i];
  NodeMemory& mem = node_memory_[n.id.Binary()];
  mem.written_used = mem.used;
  nlohmann::json j{{"node_id", n.id.Hex()}, {"address", node_addresses_[i]}, {"alive", n.alive},
                   {"total", n.total}, {"labels", n.labels}, {"memory_used_bytes", mem.used},
                   {"memory_total_bytes", mem.total}, {"memory_usage_threshold", mem.threshold}};
  options_.store->Put("nodes", n.id.Hex(), j.dump());
  Publish("nodes", n.id.Hex(), n.alive ? "ALIVE" : "DEAD");
}

void HeadService::PersistActor(const ActorRec& a) {
  const auto& o = a.spec.options;
  nlohmann::json j{{"actor_id", Hex(a.spec.actor_id)},
                   {"class", ClassOf(a.spec.factory)},
                   {"state", StateName(a.state)},
                   {"name", o.name},
                   {"namespace", o.namespace_},
                   {"resources", o.resources},
                   {"address", a.address},
                   {"pid", a.pid},
                   {"node_id", a.node >= 0 ? nodes_[a.node].id.Hex() : std::string()},
                   {"restarts", a.restarts_used},
                   {"max_restarts", o.max_restarts},
                   {"detached", o.lifetime == 1},
                   {"death_cause", a.death_cause},
                   {"death_kind", a.death_kind},
                   {"job_id", Hex(a.spec.job_id)},
                   {"placement_group_id", o.placement_group.empty() ? std::string() : Hex(o.placement_group)},
                   {"incarnation", a.incarnation},
                   {"bundle", a.bundle},
                   {"kill_requested", a.kill_requested},
                   {"subscribers", a.subscribers},
                   {"spec", UniqueIdHexBytes(internal::Pack(a.spec))}};
  options_.store->Put("actors", Hex(a.spec.actor_id), j.dump());
  Publish("actors", Hex(a.spec.actor_id), StateName(a.state));
}

void HeadService::PersistPg(const PgRec& pg) {
  static const char* kStates[] = {"PENDING", "CREATED", "REMOVED"};
  nlohmann::json nodes = nlohmann::json::array();
  for (int n : pg.node_of_bundle) nodes.push_back(n >= 0 ? nodes_[n].id.Hex() : std::string());
  nlohmann::json j{{"placement_group_id", Hex(pg.spec.pg_id)}, {"name", pg.spec.name},
                   {"strategy", PlacementStrategyName(PlacementStrategy(pg.spec.strategy))},
                   {"bundles", pg.spec.bundles}, {"bundle_nodes", nodes}, {"state", kStates[pg.state]},
                   {"reason", pg.reason}, {"spec", UniqueIdHexBytes(internal::Pack(pg.spec))}};
  options_.store->Put("placement_groups", Hex(pg.spec.pg_id), j.dump());
  Publish("placement_groups", Hex(pg.spec.pg_id), kStates[pg.state]);
}

}  // namespace orrery::scheduler
