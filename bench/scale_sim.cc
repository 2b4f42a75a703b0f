#include "bench/scale_sim.h"

#include <chrono>
#include <thread>

#include "core/internal/security.h"
#include "orrery/ids.h"

namespace orrery::bench {

using proto::MsgType;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string RandomId() { return UniqueId::Random().Binary(); }

// What every simulated node reports: its resources and a steady memory reading (so that the
// head rewrites no node record on a heartbeat, as with an idle real node).
proto::NodeInfoMsg NodeInfo(const std::string& id, const std::string& address, double cpus) {
  proto::NodeInfoMsg n;
  n.node_id = id;
  n.address = address;
  n.alive = true;
  n.total = {{"CPU", cpus}, {"memory", 64e9}};
  n.available = n.total;
  n.labels = {{"bench", "scale"}};
  n.memory_used_bytes = 8ll << 30;
  n.memory_total_bytes = 64ll << 30;
  n.memory_usage_threshold = 0.95;
  return n;
}

}  // namespace

SimCluster::SimCluster(SimOptions options)
    : options_(std::move(options)), next_request_(proto::RequestIdBase()) {
  if (options_.inboxes < 1) options_.inboxes = 1;
  for (int g = 0; g < options_.inboxes; ++g)
    node_inboxes_.push_back(std::make_unique<transport::Inbox>());
}

SimCluster::~SimCluster() { Stop(); }

Status SimCluster::Start() {
  for (auto& inbox : node_inboxes_) {
    if (Status s = inbox->Bind("127.0.0.1"); !s.ok()) return s;
  }
  if (Status s = driver_inbox_.Bind("127.0.0.1"); !s.ok()) return s;
  nodes_.resize(size_t(options_.nodes));
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    n.id = RandomId();
    n.secret = security::NewToken();
    const std::string& address = node_inboxes_[i % node_inboxes_.size()]->address();
    proto::RegisterNodeMsg reg{NodeInfo(n.id, address, options_.node_cpus), address, n.secret};
    n.frame = proto::EncodeFrame(MsgType::kRegisterNode, reg);
    node_index_[n.id] = i;
  }
  for (size_t g = 0; g < node_inboxes_.size(); ++g) {
    node_inboxes_[g]->Start([this](transport::Envelope& env) { OnNodeMessage(env); },
                            "sim-nodes-" + std::to_string(g));
  }
  driver_inbox_.Start([this](transport::Envelope& env) { OnDriverMessage(env); }, "sim-driver");
  started_ = true;
  heartbeats_ = std::thread([this] { HeartbeatLoop(); });
  return Status::Ok();
}

void SimCluster::Stop() {
  stop_ = true;
  if (heartbeats_.joinable()) heartbeats_.join();
  if (!started_) return;
  started_ = false;
  for (auto& inbox : node_inboxes_) inbox->Stop();
  driver_inbox_.Stop();
}

void SimCluster::HeartbeatLoop() {
  // Node i beats at start + i * period / N (+ k periods): the load is even over each period.
  const double period = options_.heartbeat_s;
  const size_t n = nodes_.size();
  double start = Now();
  uint64_t sent = 0;  // heartbeats sent in all; the next is node sent % n
  while (!stop_) {
    double due_until = Now() - start;
    uint64_t due = uint64_t(due_until / period * double(n)) + 1;
    for (; sent < due && !stop_; ++sent)
      transport::SendFrames(options_.head_address, nodes_[sent % n].frame, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  transport::CloseThreadSockets();
}

void SimCluster::OnNodeMessage(transport::Envelope& env) {
  switch (env.type) {
    case MsgType::kAck: {
      proto::AckMsg m;
      if (!env.Decode(&m).ok() || m.ok) return;
      std::lock_guard<std::mutex> lock(mu_);
      ++acks_refused_;
      return;
    }
    case MsgType::kStartActor: {
      proto::StartActorMsg m;
      if (!env.Decode(&m).ok()) return;
      std::lock_guard<std::mutex> lock(mu_);
      placed_.push_back(m.spec.actor_id);
      cv_.notify_all();
      return;
    }
    case MsgType::kGrantLease: {
      proto::GrantLeaseMsg m;
      if (!env.Decode(&m).ok()) return;
      std::lock_guard<std::mutex> lock(mu_);
      granted_.insert(m.request.lease_id);
      cv_.notify_all();
      return;
    }
    default:  // KillWorker, ReleaseLease: nothing runs here to stop or reuse
      return;
  }
}

void SimCluster::OnDriverMessage(transport::Envelope& env) {
  uint64_t request_id = 0;
  bool ok = true;
  switch (env.type) {
    case MsgType::kActorUpdate: {
      proto::ActorUpdateMsg u;
      if (env.Decode(&u).ok()) OnActorUpdate(u);
      return;
    }
    case MsgType::kAck: {
      proto::AckMsg m;
      ok = env.Decode(&m).ok();
      request_id = m.request_id;
      break;
    }
    case MsgType::kPlacementGroupReply: {
      proto::PlacementGroupReplyMsg m;
      ok = env.Decode(&m).ok();
      request_id = m.request_id;
      break;
    }
    case MsgType::kGetNamedActorReply: {
      proto::NamedActorMsg m;
      ok = env.Decode(&m).ok();
      request_id = m.request_id;
      break;
    }
    case MsgType::kPong: {
      proto::PingMsg m;
      ok = env.Decode(&m).ok();
      request_id = m.request_id;
      break;
    }
    case MsgType::kClusterInfoReply: {
      proto::ClusterInfoMsg m;
      ok = env.Decode(&m).ok();
      request_id = m.request_id;
      break;
    }
    default:
      return;
  }
  if (!ok) return;
  std::lock_guard<std::mutex> lock(mu_);
  replies_[request_id] = Reply{env.type, std::string(env.meta())};
  cv_.notify_all();
}

void SimCluster::OnActorUpdate(const proto::ActorUpdateMsg& u) {
  if (u.state == int(proto::ActorState::kAlive)) {
    std::lock_guard<std::mutex> lock(mu_);
    alive_.insert(u.actor_id);
    cv_.notify_all();
    return;
  }
  // The answer to SubscribeActor: where the actor was placed. Its node says it is alive.
  auto node = node_index_.find(u.node_id);
  if (u.state != int(proto::ActorState::kPending) || node == node_index_.end()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!alive_sent_.insert(u.actor_id).second) return;
  }
  proto::WorkerEventMsg e;
  e.kind = int(proto::WorkerEventKind::kActorAlive);
  e.node_id = u.node_id;
  e.actor_id = u.actor_id;
  e.incarnation = u.incarnation;
  e.address = "tcp://127.0.0.1:9";  // no worker runs: nobody calls it
  e.pid = 1;
  e.node_secret = nodes_[node->second].secret;
  transport::Send(options_.head_address, MsgType::kWorkerEvent, e);
}

template <typename Pred>
bool SimCluster::WaitUntil(std::unique_lock<std::mutex>& lock, double deadline_s, Pred pred) {
  while (!pred()) {
    double left = deadline_s - Now();
    if (left <= 0) return false;
    cv_.wait_for(lock, std::chrono::duration<double>(std::min(left, 0.1)));
  }
  return true;
}

std::optional<SimCluster::Reply> SimCluster::TakeReply(uint64_t request_id, double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!WaitUntil(lock, Now() + timeout_s, [&] { return replies_.count(request_id) > 0; }))
    return std::nullopt;
  auto node = replies_.extract(request_id);
  return node.mapped();
}

int64_t SimCluster::refused_acks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return acks_refused_;
}

int SimCluster::AliveNodes(double timeout_s) {
  uint64_t id = NextRequest();
  transport::Send(options_.head_address, MsgType::kGetClusterInfo,
                  proto::ClusterInfoMsg{id, driver_inbox_.address(), {}});
  auto reply = TakeReply(id, timeout_s);
  proto::ClusterInfoMsg info;
  if (!reply || !proto::DecodeMeta(reply->meta, &info).ok()) return -1;
  int alive = 0;
  for (const auto& n : info.nodes) alive += n.alive && node_index_.count(n.node_id) ? 1 : 0;
  return alive;
}

bool SimCluster::WaitAllAlive(double timeout_s) {
  double deadline = Now() + timeout_s;
  while (Now() < deadline) {
    if (AliveNodes(std::max(0.1, std::min(5.0, deadline - Now()))) == options_.nodes) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

SimCluster::Placement SimCluster::PlaceActors(int count, int window, const std::string& name,
                                              double timeout_s) {
  Placement out;
  out.requested = count;
  size_t base;
  {
    std::lock_guard<std::mutex> lock(mu_);
    base = placed_.size();
  }
  std::vector<uint64_t> requests;
  double start = Now(), deadline = start + timeout_s;
  for (int i = 0; i < count; ++i) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!WaitUntil(lock, deadline, [&] { return int(placed_.size() - base) + window > i; }))
        break;
    }
    proto::CreateActorMsg m;
    m.request_id = NextRequest();
    m.reply_to = driver_inbox_.address();
    m.spec.actor_id = RandomId();
    m.spec.job_id = std::string(UniqueId::kSize, '\0');  // no job: nothing is run
    m.spec.factory = "ScaleBench::Create";
    m.spec.owner = driver_inbox_.address();
    m.spec.options.resources = {{"CPU", 1.0}};
    if (i == 0 && !name.empty()) {
      m.spec.options.name = name;
      m.spec.options.namespace_ = "bench";
      m.spec.options.lifetime = 1;  // detached
      named_actor_id_ = m.spec.actor_id;
    }
    requests.push_back(m.request_id);
    transport::Send(options_.head_address, MsgType::kCreateActor, m);
  }
  std::unique_lock<std::mutex> lock(mu_);
  WaitUntil(lock, deadline, [&] { return int(placed_.size() - base) >= count; });
  out.placed = int(placed_.size() - base);
  out.seconds = Now() - start;
  // Each ack left the head before its StartActor, but to another inbox: wait for them too.
  size_t acked = 0;
  WaitUntil(lock, deadline, [&] {
    while (acked < requests.size() && replies_.count(requests[acked])) ++acked;
    return acked == requests.size();
  });
  for (uint64_t id : requests) {
    auto it = replies_.find(id);
    if (it == replies_.end()) continue;
    proto::AckMsg ack;
    if (proto::DecodeMeta(it->second.meta, &ack).ok() && ack.ok) ++out.acked;
    replies_.erase(it);
  }
  return out;
}

int SimCluster::MakeAlive(int window, double timeout_s) {
  std::vector<std::string> actors;
  {
    std::lock_guard<std::mutex> lock(mu_);
    actors = placed_;
  }
  double deadline = Now() + timeout_s;
  for (size_t i = 0; i < actors.size(); ++i) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!WaitUntil(lock, deadline, [&] { return alive_.size() + size_t(window) > i; })) break;
    }
    transport::Send(options_.head_address, MsgType::kSubscribeActor,
                    proto::SubscribeActorMsg{actors[i], driver_inbox_.address()});
  }
  std::unique_lock<std::mutex> lock(mu_);
  WaitUntil(lock, deadline, [&] { return alive_.size() >= actors.size(); });
  return int(alive_.size());
}

SimCluster::PgCycles SimCluster::CreateRemovePgs(double seconds, double timeout_s) {
  PgCycles out;
  double start = Now();
  while (out.done == 0 || Now() - start < seconds) {
    proto::PlacementGroupMsg m;
    m.request_id = NextRequest();
    m.reply_to = driver_inbox_.address();
    m.pg_id = RandomId();
    m.bundles = {{{"CPU", 1.0}}};
    transport::Send(options_.head_address, MsgType::kCreatePlacementGroup, m);
    auto reply = TakeReply(m.request_id, timeout_s);
    proto::PlacementGroupReplyMsg r;
    bool ok = reply && proto::DecodeMeta(reply->meta, &r).ok() && r.ok;
    if (ok && !r.ready) {  // not placed at once: wait for it
      m.request_id = NextRequest();
      m.timeout_s = timeout_s;
      transport::Send(options_.head_address, MsgType::kWaitPlacementGroup, m);
      reply = TakeReply(m.request_id, timeout_s);
      ok = reply && proto::DecodeMeta(reply->meta, &r).ok() && r.ok && r.ready;
    }
    m.request_id = NextRequest();
    transport::Send(options_.head_address, MsgType::kRemovePlacementGroup, m);
    reply = TakeReply(m.request_id, timeout_s);
    proto::AckMsg ack;
    ok = ok && reply && proto::DecodeMeta(reply->meta, &ack).ok() && ack.ok;
    if (!ok) {
      ++out.failed;
      break;
    }
    ++out.done;
  }
  out.seconds = Now() - start;
  return out;
}

SimCluster::LeaseCycles SimCluster::GrantLeases(int count, int window, double timeout_s) {
  LeaseCycles out;
  double start = Now(), deadline = start + timeout_s;
  int sent = 0;
  std::unique_lock<std::mutex> lock(mu_);
  granted_.clear();
  while (out.granted < count) {
    for (; sent < count && sent - out.granted < window; ++sent) {
      proto::LeaseRequestMsg m;
      m.request_id = NextRequest();
      m.lease_id = RandomId();
      m.reply_to = driver_inbox_.address();
      m.resources = {{"CPU", 1.0}};
      m.job_id = std::string(UniqueId::kSize, '\0');
      lock.unlock();
      transport::Send(options_.head_address, MsgType::kRequestLease, m);
      lock.lock();
    }
    if (!WaitUntil(lock, deadline, [&] { return !granted_.empty(); })) break;
    // Each granted lease goes back at once, as a driver whose task finished returns it.
    std::vector<std::string> done(granted_.begin(), granted_.end());
    granted_.clear();
    lock.unlock();
    for (const auto& id : done)
      transport::Send(options_.head_address, MsgType::kReturnLease,
                      proto::ReturnLeaseMsg{id, false});
    lock.lock();
    out.granted += int(done.size());
  }
  out.seconds = Now() - start;
  return out;
}

double SimCluster::PingSeconds(double timeout_s) {
  uint64_t id = NextRequest();
  double start = Now();
  transport::Send(options_.head_address, MsgType::kPing,
                  proto::PingMsg{id, driver_inbox_.address()});
  return TakeReply(id, timeout_s) ? Now() - start : -1;
}

std::optional<std::string> SimCluster::LookupNamed(const std::string& name, double timeout_s) {
  proto::NamedActorMsg m;
  m.request_id = NextRequest();
  m.reply_to = driver_inbox_.address();
  m.name = name;
  m.namespace_ = "bench";
  transport::Send(options_.head_address, MsgType::kGetNamedActor, m);
  auto reply = TakeReply(m.request_id, timeout_s);
  proto::NamedActorMsg r;
  if (!reply || !proto::DecodeMeta(reply->meta, &r).ok()) return std::nullopt;
  return r.actor_id;
}

}  // namespace orrery::bench
