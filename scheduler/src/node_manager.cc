#include "scheduler/src/node_manager.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/internal/log.h"
#include "core/internal/rate_limit.h"
#include "core/internal/security.h"
#include "orrery/resources.h"
#include "scheduler/src/records.h"

namespace orrery::scheduler {

namespace {
RateLimitedLog spoofed_log;
// A refused node asks again only if it is restarted as it was; a loop of such restarts
// must not fill the head's log.
RateLimitedLog refused_log(10.0);
}  // namespace

bool NodeManager::UpdateMemory(NodeMemory& mem, const proto::NodeInfoMsg& info) const {
  // As the peer says, clamped to what can be true; the record is rewritten when the reading
  // moved by 1% of the total.
  int64_t total = std::max<int64_t>(0, info.memory_total_bytes);
  int64_t used = std::clamp<int64_t>(info.memory_used_bytes, 0, total);
  double threshold = std::isfinite(info.memory_usage_threshold)
                         ? std::clamp(info.memory_usage_threshold, 0.0, 1.0)
                         : 0.0;
  bool moved = mem.written_used < 0 || mem.total != total || mem.threshold != threshold ||
               (used != mem.written_used &&
                std::abs(double(used) - double(mem.written_used)) >= 0.01 * double(total));
  mem.used = used;
  mem.total = total;
  mem.threshold = threshold;
  return moved;
}

bool NodeManager::UpdateObjectStore(NodeObjectStore& store,
                                    const proto::ObjectStoreUsageMsg& usage) {
  // As the peer says, clamped to what can be true (records' bounds; used within the
  // capacity). The record is rewritten when the bytes in the store or spilled moved by 1% of
  // the capacity, or the object count changed.
  proto::ObjectStoreUsageMsg u;
  u.capacity_bytes = std::min(usage.capacity_bytes, records::kMaxObjectStoreBytes);
  u.used_bytes = std::min(usage.used_bytes, u.capacity_bytes);
  u.spilled_bytes = std::min(usage.spilled_bytes, records::kMaxObjectStoreBytes);
  u.num_objects = std::min(usage.num_objects, records::kMaxObjectStoreObjects);
  auto moved_by = [&](uint64_t now, uint64_t written) {
    return now != written &&
           std::abs(double(now) - double(written)) >= 0.01 * double(u.capacity_bytes);
  };
  bool moved = store.written_used < 0 || store.usage.capacity_bytes != u.capacity_bytes ||
               store.written_num_objects != u.num_objects ||
               moved_by(u.used_bytes, uint64_t(store.written_used)) ||
               moved_by(u.spilled_bytes, store.written_spilled);
  store.usage = u;
  return moved;
}

Status NodeManager::CheckObjectStore(const proto::NodeInfoMsg& info) {
  if (info.object_store_path.size() > kMaxObjectStorePathBytes)
    return Status::InvalidArgument("the node's object store path is longer than 4096 bytes");
  if (info.object_store_tag.size() > kMaxObjectStoreTagBytes)
    return Status::InvalidArgument("the node's object store tag is longer than 256 bytes");
  Status s = records::CheckUtf8("the node's object store path", info.object_store_path);
  return s.ok() ? records::CheckUtf8("the node's object store tag", info.object_store_tag) : s;
}

std::string NodeManager::MetricsAddressOf(const proto::NodeInfoMsg& info) {
  const std::string& a = info.metrics_address;
  if (a.empty() || a.size() > 256 || a.find(':') == std::string::npos) return "";
  for (char c : a) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == ':' || c == '-' ||
              c == '_' || c == '[' || c == ']';
    if (!ok) return "";
  }
  return a;
}

NodeManager::Registration NodeManager::OnRegister(const proto::RegisterNodeMsg& m, double now,
                                                  int* index) {
  NodeId id(UniqueId::FromBinary(m.node.node_id));
  if (!FromNode(id.Binary(), m.node_secret, m.node.alive ? "registration" : "goodbye",
                m.node.alive))
    return Registration::kIgnored;
  int i = Index(id.Binary());
  *index = i;
  if (!m.node.alive) {  // a clean exit: dead at once
    return i >= 0 && alive(i) ? Registration::kLeft : Registration::kIgnored;
  }
  if (i >= 0 && alive(i)) {  // a heartbeat
    NodeEntry& e = entries_[size_t(i)];
    e.last_seen = now;
    // A node restored from the store has no path yet: its first heartbeat brings it.
    if (e.object_store_path.empty() && e.object_store_tag.empty() &&
        CheckObjectStore(m.node).ok()) {
      e.object_store_path = m.node.object_store_path;
      e.object_store_tag = m.node.object_store_tag;
    }
    bool moved = UpdateMemory(e.memory, m.node);
    if (std::string metrics = MetricsAddressOf(m.node); metrics != e.metrics_address) {
      e.metrics_address = metrics;  // a node restored from the store brings it again
      moved = true;
    }
    if (UpdateObjectStore(e.objects, m.node.object_store) || moved) Persist(i);
    ctx_.Ack(m.reply_to, 0);
    return Registration::kHeartbeat;
  }
  Status valid = records::CheckUtf8("the node's", m.node.labels);
  if (valid.ok()) valid = records::CheckUtf8("the node's", m.node.total);
  if (valid.ok()) valid = records::CheckUtf8("the node's address", m.node.address);
  if (valid.ok()) valid = CheckObjectStore(m.node);
  if (!valid.ok()) {
    if (uint64_t suppressed = 0; refused_log.ShouldLog(&suppressed))
      LOG_WARN("refused to register node " + id.Hex() + ": " + valid.message() +
               RateLimitedLog::More(suppressed));
    ctx_.Ack(m.reply_to, 0, false, proto::ErrorKind::kConfigError, valid.message());
    return Registration::kRefused;
  }
  NodeEntry entry{NodeView{id, true, m.node.total, m.node.total, m.node.labels},
                  m.node.address,
                  now,
                  i >= 0 ? entries_[size_t(i)].memory : NodeMemory{},
                  i >= 0 ? entries_[size_t(i)].objects : NodeObjectStore{},
                  m.node.object_store_path,
                  m.node.object_store_tag,
                  MetricsAddressOf(m.node)};
  UpdateMemory(entry.memory, m.node);
  UpdateObjectStore(entry.objects, m.node.object_store);
  if (i >= 0) {
    entries_[size_t(i)] = std::move(entry);
  } else {
    i = Add(std::move(entry));
  }
  *index = i;
  ++epoch_;
  LOG_INFO("node " + id.Hex() + " registered at " + m.node.address + " with " +
           ToString(m.node.total));
  Persist(i);
  ctx_.Ack(m.reply_to, 0);
  return Registration::kJoined;
}

bool NodeManager::FromNode(const std::string& node_id, const std::string& secret, const char* what,
                           bool adopt) {
  auto known = secrets_.find(node_id);
  bool ok = false;
  if (secret.empty() || secret.size() > 256) {
    ok = false;
  } else if (known != secrets_.end()) {
    ok = security::SecretEquals(known->second, security::Sha256Hex(secret));
  } else if (adopt) {
    secrets_[node_id] = security::Sha256Hex(secret);
    ok = true;
  }
  if (!ok) {
    uint64_t suppressed = 0;
    if (spoofed_log.ShouldLog(&suppressed)) {
      LOG_WARN(std::string("dropped a ") + what + " for node " + Hex(node_id) +
               " that did not come from that node (its node secret does not match)" +
               RateLimitedLog::More(suppressed));
    }
  }
  return ok;
}

int NodeManager::Index(const std::string& binary_id) const {
  auto it = index_.find(binary_id);
  return it == index_.end() ? -1 : it->second;
}

int NodeManager::IndexOfHex(const std::string& hex) const {
  if (hex.size() != 2 * UniqueId::kSize) return -1;
  UniqueId id = UniqueId::FromHex(hex);
  return id.Hex() == hex ? Index(id.Binary()) : -1;
}

std::string NodeManager::HexId(int i) const {
  return i >= 0 ? entries_[size_t(i)].view.id.Hex() : std::string();
}

void NodeManager::Give(int i, const Resources& r) {
  orrery::Add(entries_[size_t(i)].view.available, r);
  ++epoch_;
}

int NodeManager::Add(NodeEntry entry) {
  int i = int(entries_.size());
  index_[entry.view.id.Binary()] = i;
  entries_.push_back(std::move(entry));
  return i;
}

void NodeManager::SetSuspected(int i, bool suspected) {
  NodeView& n = entries_[size_t(i)].view;
  if (!n.alive || n.suspected == suspected) return;
  n.suspected = suspected;
  ++epoch_;  // a node heard from again may take what waited
  ctx_.Publish("nodes", n.id.Hex(), suspected ? "SUSPECTED" : "ALIVE");
}

void NodeManager::MarkDead(int i, const std::string& cause) {
  NodeView& n = entries_[size_t(i)].view;
  n.alive = false;
  n.suspected = false;
  entries_[size_t(i)].end_time = WallSeconds();
  ++epoch_;
  if (cause == kLeftCleanly) {
    LOG_INFO("node " + n.id.Hex() + " left the cluster");
  } else {
    LOG_WARN("node " + n.id.Hex() + " is dead: " + cause);
  }
}

void NodeManager::FreeAll(int i) {
  NodeView& n = entries_[size_t(i)].view;
  n.available = n.total;  // nothing runs there any more; it is skipped as dead
  ++epoch_;
  Persist(i);
}

proto::ClusterInfoMsg NodeManager::Info(uint64_t request_id) const {
  proto::ClusterInfoMsg reply{request_id, "", {}};
  reply.nodes.reserve(entries_.size());
  for (const NodeEntry& e : entries_) {
    if (e.forgotten) continue;
    const NodeView& n = e.view;
    reply.nodes.push_back({n.id.Binary(), e.address, n.alive, n.total, n.available, n.labels,
                           e.memory.used, e.memory.total, e.memory.threshold, e.objects.usage,
                           e.object_store_path, e.object_store_tag, e.metrics_address,
                           n.suspected});
  }
  return reply;
}

bool NodeManager::Forget(const std::string& node_hex) {
  int i = IndexOfHex(node_hex);
  if (i < 0) return true;
  NodeEntry& e = entries_[size_t(i)];
  if (e.view.alive) return false;
  index_.erase(e.view.id.Binary());
  secrets_.erase(e.view.id.Binary());
  // The id stays (placement groups may name the slot); everything else goes.
  NodeEntry empty;
  empty.view.id = e.view.id;
  empty.view.alive = false;
  empty.forgotten = true;
  e = std::move(empty);
  return true;
}

void NodeManager::Persist(int i) {
  NodeEntry& e = entries_[size_t(i)];
  const NodeView& n = e.view;
  e.memory.written_used = e.memory.used;
  const proto::ObjectStoreUsageMsg& u = e.objects.usage;
  e.objects.written_used = int64_t(u.used_bytes);
  e.objects.written_spilled = u.spilled_bytes;
  e.objects.written_num_objects = u.num_objects;
  records::NodeRecord r{n.id,           e.address,          n.alive,
                        n.total,        n.labels,           e.memory.used,
                        e.memory.total, e.memory.threshold, u.capacity_bytes,
                        u.used_bytes,   u.spilled_bytes,    u.num_objects};
  if (auto secret = secrets_.find(n.id.Binary()); secret != secrets_.end())
    r.secret_sha256 = secret->second;
  r.end_time = n.alive ? 0 : e.end_time;
  r.metrics_address = e.metrics_address;
  ctx_.store->Put("nodes", n.id.Hex(), records::NodeRecordJson(r));
  ctx_.Publish("nodes", n.id.Hex(), n.alive ? "ALIVE" : "DEAD");
}

void NodeManager::Restore(const TableRecords& records, double now) {
  for (const auto& [key, text] : records) {
    auto r = records::ParseNodeRecord(text);
    if (!RecordUsable(r.status(), "node", key)) continue;
    if (r->id.Hex() != key || Index(r->id.Binary()) >= 0) {
      LOG_WARN("skipping a node record filed under another id: " + records::EscapeUtf8(key));
      continue;
    }
    NodeView n{r->id, r->alive, r->total, r->total, r->labels};
    if (!n.alive) n.available.clear();
    NodeMemory mem{r->memory_used_bytes, r->memory_total_bytes, r->memory_usage_threshold};
    NodeObjectStore objects;
    objects.usage = {r->object_store_capacity_bytes, r->object_store_used_bytes,
                     r->object_store_spilled_bytes, r->object_store_num_objects};
    if (!r->secret_sha256.empty()) secrets_[r->id.Binary()] = r->secret_sha256;
    // A full grace period to send a heartbeat; the path and tag come with it.
    int i = Add(NodeEntry{std::move(n), r->address, now, mem, objects, "", "", r->metrics_address});
    entries_[size_t(i)].end_time = r->alive ? 0 : r->end_time;
  }
}

}  // namespace orrery::scheduler
