#include "scheduler/src/head_service.h"

#include <algorithm>
#include <cstdlib>

#include "core/src/log.h"
#include "scheduler/src/records.h"

namespace orrery::scheduler {

using proto::MsgType;

namespace {
std::string DefaultBinaryDir() {
  const char* t = std::getenv("ORRERY_TMPDIR");
  return std::string(t && *t ? t : "/tmp/orrery") + "/head_binaries";
}

HeadOptions WithDefaults(HeadOptions o) {
  if (!o.store) o.store = std::make_shared<InMemoryStateStore>();
  if (o.binary_dir.empty()) o.binary_dir = DefaultBinaryDir();
  return o;
}
}  // namespace

HeadService::HeadService(HeadOptions options)
    : options_(WithDefaults(std::move(options))),
      ctx_{options_.store, std::make_shared<TransportOutbox>()},
      nodes_(ctx_),
      queue_(ctx_),
      pgs_(ctx_, nodes_, queue_),
      jobs_(ctx_, options_.binary_dir),
      records_(ctx_),
      book_(nodes_, pgs_),
      actors_(ctx_, nodes_, book_, queue_, jobs_),
      leases_(ctx_, nodes_, book_, queue_, jobs_, pgs_) {
  queue_.SetSource(DemandKind::kActor, &actors_);
  queue_.SetSource(DemandKind::kLease, &leases_);
  queue_.SetSource(DemandKind::kPg, &pgs_);
  pgs_.SetOnRemoved([this](const std::string& pg_id) { actors_.PlacementGroupRemoved(pg_id); });
  jobs_.SetOnEnded([this](const std::string& job_id, const std::string&) { JobEnded(job_id); });
  RegisterHandlers();
}

HeadService::~HeadService() { Stop(); }

Status HeadService::Start() {
  if (Status s = Recover(); !s.ok()) return s;
  inbox_.SetMaxMessageBytes(options_.max_message_bytes);
  Status s = inbox_.Bind(options_.bind_host, options_.port, options_.advertise_host);
  if (!s.ok()) return s;
  inbox_.SetTick(100, [this] { Tick(); });
  inbox_.Start([this](transport::Envelope& env) { Handle(env); }, "orrery-head");
  LOG_INFO("head listening on " + inbox_.address());
  return Status::Ok();
}

void HeadService::Stop() { inbox_.Stop(); }

template <typename Msg>
void HeadService::On(MsgType type, std::function<void(const Msg&, transport::Envelope&)> handle) {
  handlers_[int(type)] = [handle = std::move(handle)](transport::Envelope& env) {
    handle(env.DecodeOrThrow<Msg>(), env);
  };
}

void HeadService::RegisterHandlers() {
  using E = transport::Envelope;
  On<proto::RegisterNodeMsg>(MsgType::kRegisterNode,
                             [this](const auto& m, E&) { OnRegisterNode(m); });
  On<proto::WorkerEventMsg>(MsgType::kWorkerEvent, [this](const auto& m, E&) { OnWorkerEvent(m); });
  On<proto::ClusterInfoMsg>(MsgType::kGetClusterInfo, [this](const auto& m, E&) {
    ctx_.outbox->Send(m.reply_to, MsgType::kClusterInfoReply, nodes_.Info(m.request_id));
  });
  On<proto::PingMsg>(MsgType::kPing, [this](const auto& m, E&) {
    if (!m.reply_to.empty()) ctx_.outbox->Send(m.reply_to, MsgType::kPong, m);
  });
  On<proto::CreateActorMsg>(MsgType::kCreateActor,
                            [this](const auto& m, E&) { actors_.OnCreate(m, Now()); });
  On<proto::SubscribeActorMsg>(MsgType::kSubscribeActor,
                               [this](const auto& m, E&) { actors_.OnSubscribe(m); });
  On<proto::NamedActorMsg>(MsgType::kGetNamedActor,
                           [this](const auto& m, E&) { actors_.OnGetNamed(m); });
  On<proto::KillActorMsg>(MsgType::kKillActor, [this](const auto& m, E&) { actors_.OnKill(m); });
  On<proto::LeaseRequestMsg>(MsgType::kRequestLease,
                             [this](const auto& m, E&) { leases_.OnRequest(m, Now()); });
  On<proto::ReturnLeaseMsg>(MsgType::kReturnLease,
                            [this](const auto& m, E&) { leases_.OnReturn(m, Now()); });
  On<proto::PlacementGroupMsg>(MsgType::kCreatePlacementGroup,
                               [this](const auto& m, E&) { pgs_.OnCreate(m, Now()); });
  On<proto::PlacementGroupMsg>(MsgType::kWaitPlacementGroup,
                               [this](const auto& m, E&) { pgs_.OnWait(m, Now()); });
  On<proto::PlacementGroupMsg>(MsgType::kRemovePlacementGroup,
                               [this](const auto& m, E&) { pgs_.OnRemove(m, Now()); });
  On<proto::JobMsg>(MsgType::kRegisterJob,
                    [this](const auto& m, E&) { jobs_.OnRegister(m, Now()); });
  On<proto::BinaryMsg>(MsgType::kPutBinary, [this](const auto& m, E& env) {
    jobs_.OnPutBinary(m, env.PayloadString());
  });
  On<proto::BinaryMsg>(MsgType::kFetchBinary,
                       [this](const auto& m, E&) { jobs_.OnFetchBinary(m); });
  On<proto::RecordMsg>(MsgType::kPutRecord, [this](const auto& m, E&) { records_.OnPutRecord(m); });
}

void HeadService::Handle(transport::Envelope& env) {
  auto it = handlers_.find(int(env.type));
  if (it == handlers_.end()) {
    throw std::runtime_error(std::string("the head does not handle ") + proto::TypeName(env.type));
  }
  it->second(env);
}

void HeadService::OnRegisterNode(const proto::RegisterNodeMsg& m) {
  int i = -1;
  switch (nodes_.OnRegister(m, Now(), &i)) {
    case NodeManager::Registration::kLeft:
      return NodeDied(i, kLeftCleanly);
    case NodeManager::Registration::kJoined:
      return queue_.ScheduleAll(Now());
    case NodeManager::Registration::kIgnored:
    case NodeManager::Registration::kRefused:
    case NodeManager::Registration::kHeartbeat:
      return;
  }
}

void HeadService::OnWorkerEvent(proto::WorkerEventMsg m) {
  // Only a node's own events count, and only for the actors and leases placed on it.
  int node = nodes_.Index(m.node_id);
  if (node < 0 || !nodes_.FromNode(m.node_id, m.node_secret, "worker event", false)) return;
  m.cause = records::EscapeUtf8(m.cause);  // error text: any bytes, kept escaped
  m.address = records::EscapeUtf8(m.address);
  double now = Now();
  switch (proto::WorkerEventKind(m.kind)) {
    case proto::WorkerEventKind::kActorAlive:
      return actors_.OnWorkerEvent(m, node, now);
    case proto::WorkerEventKind::kActorDied:
      actors_.OnWorkerEvent(m, node, now);
      return queue_.ScheduleAll(now);
    case proto::WorkerEventKind::kLeaseWorkerDied:
    case proto::WorkerEventKind::kLeaseFailed:
      return leases_.OnWorkerEvent(m, node, now);
  }
}

void HeadService::NodeDied(int i, const std::string& cause) {
  double now = Now();
  nodes_.MarkDead(i, cause);
  actors_.NodeDied(i, cause, now);
  leases_.NodeDied(i, cause);
  nodes_.FreeAll(i);
  queue_.ScheduleAll(now);
}

void HeadService::JobEnded(const std::string& job_id) {
  actors_.JobEnded(job_id);
  leases_.JobEnded(job_id);
  queue_.ScheduleAll(Now());
}

void HeadService::Tick() {
  double now = Now();
  queue_.ScheduleAll(now);
  double limit = options_.health_check_period_s * options_.health_check_failure_threshold;
  for (const auto& [i, cause] : nodes_.Silent(now, limit)) NodeDied(i, cause);
  jobs_.Tick(now, std::max(limit, kJobTimeoutS));
  pgs_.Tick(now);
}

}  // namespace orrery::scheduler
