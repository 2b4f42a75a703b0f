#include "scheduler/internal/head_service.h"

#include <algorithm>
#include <cstdlib>

#include "core/internal/log.h"
#include "core/internal/rate_limit.h"
#include "core/internal/session_dir.h"
#include "scheduler/src/head_autoscaler.h"
#include "scheduler/src/head_metrics.h"
#include "scheduler/src/records.h"

namespace orrery::scheduler {

using proto::MsgType;

namespace {
std::string DefaultBinaryDir() { return SessionRoot() + "/head_binaries"; }

FailurePolicy HealthPolicy(const HeadOptions& o) {
  FailurePolicy p;
  p.period_s = o.health_check_period_s;
  p.tolerance_s = o.health_check_period_s * std::max(1, o.health_check_failure_threshold);
  p.suspect_after_s = std::min(3 * p.period_s, p.tolerance_s);
  return p;
}

// Drivers send a heartbeat every kDriverHeartbeatS, whatever the nodes' period.
FailurePolicy DriverPolicy(const HeadOptions& o) {
  FailurePolicy p;
  p.period_s = kDriverHeartbeatS;
  p.suspect_after_s = 3 * kDriverHeartbeatS;
  p.tolerance_s = std::max(HealthPolicy(o).tolerance_s, kMinDriverToleranceS);
  return p;
}

double ProbeTimeout(const HeadOptions& o) { return std::clamp(o.health_check_period_s, 0.1, 1.0); }

HeadOptions WithDefaults(HeadOptions o) {
  if (!o.store) o.store = std::make_shared<InMemoryStateStore>();
  if (o.binary_dir.empty()) o.binary_dir = DefaultBinaryDir();
  return o;
}
}  // namespace

HeadService::HeadService(HeadOptions options)
    : options_(WithDefaults(std::move(options))),
      retention_(options_.history_ttl_s > 0
                     ? std::make_shared<RetentionStore>(options_.store, options_.history_ttl_s)
                     : nullptr),
      m_(HeadContext{retention_ ? retention_ : options_.store,
                     std::shared_ptr<Outbox>(&TransportOutbox(), [](Outbox*) {})},
         options_.binary_dir),
      nodes_health_(HealthPolicy(options_), MakeConnectProber(ProbeTimeout(options_))),
      drivers_health_(DriverPolicy(options_), MakeConnectProber(1.0)) {
  if (retention_) {
    retention_->SetForget(
        [this](const std::string& table, const std::string& key) { return m_.Forget(table, key); });
  }
  RegisterHandlers();
}

HeadService::~HeadService() { Stop(); }

Status HeadService::Start() {
  if (Status s = Recover(); !s.ok()) return s;
  inbox_.SetMaxMessageBytes(options_.max_message_bytes);
  Status s = inbox_.Bind(options_.bind_host, options_.port, options_.advertise_host);
  if (!s.ok()) return s;
  if (Status m = StartMetrics(); !m.ok()) return m;
  inbox_.SetTick(100, [this] { Tick(); });
  inbox_.Start([this](transport::Envelope& env) { return Handle(env); }, "orrery-head");
  m_.ctx.stored_acks->SetPoster(
      [this](std::function<void()> send) { inbox_.Post(std::move(send)); });
  m_.submissions.SetHeadAddress(inbox_.address());
  LOG_INFO("head listening on " + inbox_.address());
  return Status::Ok();
}

void HeadService::Stop() {
  m_.ctx.stored_acks->SetPoster(nullptr);
  inbox_.Stop();
  if (metrics_) metrics_->Stop();
}

Status HeadService::StartMetrics() {
  if (options_.metrics_port >= 0) {
    metrics_ = std::make_unique<metrics::MetricsServer>();
    auto address = metrics::StartIfEnabled(*metrics_, options_.bind_host, options_.metrics_port,
                                           options_.advertise_host);
    if (!address.ok()) return address.status();
    metrics_address_ = address.value();
    metrics_->SetSnapshot(HeadMetricsText(m_, *options_.store));
    LOG_INFO("head metrics at http://" + metrics_address_ + "/metrics");
  }
  // Written even when off, so that no address of an earlier head outlives it.
  options_.store->Put("head", "head", HeadRecordJson(metrics_address_));
  return Status::Ok();
}

template <typename Msg>
void HeadService::On(MsgType type, std::function<void(const Msg&, transport::Envelope&)> handle) {
  handlers_[int(type)] = [handle = std::move(handle)](transport::Envelope& env) {
    return transport::DecodeAnd<Msg>(env, [&](const Msg& m) { handle(m, env); });
  };
}

void HeadService::RegisterHandlers() {
  using E = transport::Envelope;
  On<proto::RegisterNodeMsg>(MsgType::kRegisterNode,
                             [this](const auto& m, E&) { OnRegisterNode(m); });
  On<proto::WorkerEventMsg>(MsgType::kWorkerEvent, [this](const auto& m, E&) { OnWorkerEvent(m); });
  On<proto::ClusterInfoMsg>(MsgType::kGetClusterInfo, [this](const auto& m, E&) {
    proto::ClusterInfoMsg reply = m_.nodes.Info(m.request_id);
    if (m_.autoscaler.active(Now())) reply.autoscaler_groups = m_.autoscaler.groups();
    m_.ctx.outbox->Send(m.reply_to, MsgType::kClusterInfoReply, reply);
  });
  On<proto::AutoscalerSyncMsg>(MsgType::kAutoscalerSync, [this](const auto& m, E&) {
    m_.ctx.outbox->Send(m.reply_to, MsgType::kAutoscalerState, AutoscalerSync(m_, m, Now()));
  });
  On<proto::PingMsg>(MsgType::kPing, [this](const auto& m, E&) {
    if (!m.reply_to.empty()) m_.ctx.outbox->Send(m.reply_to, MsgType::kPong, m);
  });
  On<proto::CreateActorMsg>(MsgType::kCreateActor,
                            [this](const auto& m, E&) { m_.actors.OnCreate(m, Now()); });
  On<proto::SubscribeActorMsg>(MsgType::kSubscribeActor,
                               [this](const auto& m, E&) { m_.actors.OnSubscribe(m, Now()); });
  On<proto::NamedActorMsg>(MsgType::kGetNamedActor,
                           [this](const auto& m, E&) { m_.actors.OnGetNamed(m); });
  On<proto::KillActorMsg>(MsgType::kKillActor, [this](const auto& m, E&) { m_.actors.OnKill(m); });
  On<proto::LeaseRequestMsg>(MsgType::kRequestLease,
                             [this](const auto& m, E&) { m_.leases.OnRequest(m, Now()); });
  On<proto::ReturnLeaseMsg>(MsgType::kReturnLease,
                            [this](const auto& m, E&) { m_.leases.OnReturn(m, Now()); });
  On<proto::PlacementGroupMsg>(MsgType::kCreatePlacementGroup,
                               [this](const auto& m, E&) { m_.pgs.OnCreate(m, Now()); });
  On<proto::PlacementGroupMsg>(MsgType::kWaitPlacementGroup,
                               [this](const auto& m, E&) { m_.pgs.OnWait(m, Now()); });
  On<proto::PlacementGroupMsg>(MsgType::kRemovePlacementGroup,
                               [this](const auto& m, E&) { m_.pgs.OnRemove(m, Now()); });
  On<proto::JobMsg>(MsgType::kRegisterJob, [this](const auto& m, E&) {
    m_.jobs.OnRegister(m, Now());
    HeardJob(m);
    if (!m.submission_id.empty() && m_.jobs.IsAlive(m.job_id))
      m_.submissions.DriverRegistered(m.submission_id, Hex(m.job_id));
  });
  On<proto::BinaryMsg>(MsgType::kPutBinary, [this](const auto& m, E& env) {
    m_.jobs.OnPutBinary(m, env.PayloadString());
  });
  On<proto::BinaryMsg>(MsgType::kFetchBinary,
                       [this](const auto& m, E&) { m_.jobs.OnFetchBinary(m); });
  On<proto::RecordMsg>(MsgType::kPutRecord,
                       [this](const auto& m, E&) { m_.records.OnPutRecord(m); });
  On<proto::SubmitJobMsg>(MsgType::kSubmitJob,
                          [this](const auto& m, E&) { m_.submissions.OnSubmit(m, WallSeconds()); });
  On<proto::StopJobMsg>(MsgType::kStopJob,
                        [this](const auto& m, E&) { m_.submissions.OnStop(m, WallSeconds()); });
  On<proto::JobEventMsg>(MsgType::kJobEvent, [this](const auto& m, E&) {
    int node = m_.nodes.Index(m.node_id);
    if (node < 0 || !m_.nodes.FromNode(m.node_id, m.node_secret, "job event", false)) return;
    m_.submissions.OnJobEvent(m, node, WallSeconds());
    // As a worker event's: acknowledged once what it changed is stored (a resend changes
    // nothing), so that a job's exit reaches a head restarted meanwhile.
    m_.ctx.AckWhenStored(m.reply_to, m.request_id);
  });
  On<proto::LogBatchMsg>(MsgType::kLogBatch, [this](const auto& m, E&) {
    int node = m_.nodes.IndexOfHex(m.node_id);
    if (node < 0) return;
    std::string id = m_.nodes.at(node).view.id.Binary();
    if (!m_.nodes.FromNode(id, m.node_secret, "log batch", false)) return;
    m_.submissions.OnLogBatch(m, node);
  });
}

Status HeadService::Handle(transport::Envelope& env) {
  auto it = handlers_.find(int(env.type));
  if (it == handlers_.end())
    return Status::InvalidArgument(std::string("the head does not handle ") +
                                   proto::TypeName(env.type));
  return it->second(env);
}

void HeadService::OnRegisterNode(const proto::RegisterNodeMsg& m) {
  if (m_.autoscaler.removed(m.node.node_id)) {  // it is on its way out
    static RateLimitedLog removed_log(10.0);    // each heartbeat of such a node lands here
    if (uint64_t suppressed = 0; removed_log.ShouldLog(&suppressed))
      LOG_INFO("refused the registration of node " + UniqueId::FromBinary(m.node.node_id).Hex() +
               ": the autoscaler removed it" + RateLimitedLog::More(suppressed));
    return m_.ctx.Ack(m.reply_to, 0, false, proto::ErrorKind::kConfigError,
                      "the autoscaler removed this node");
  }
  int i = -1;
  switch (m_.nodes.OnRegister(m, Now(), &i)) {
    case NodeManager::Registration::kLeft:
      m_.NodeDied(i, kLeftCleanly, Now());
      return HeardNode(i);  // dead: no longer watched
    case NodeManager::Registration::kJoined:
      HeardNode(i);
      return m_.queue.ScheduleAll(Now());
    case NodeManager::Registration::kHeartbeat:
      return HeardNode(i);
    case NodeManager::Registration::kIgnored:
    case NodeManager::Registration::kRefused:
      return;
  }
}

void HeadService::OnWorkerEvent(proto::WorkerEventMsg m) {
  // Only a node's own events count, and only for the actors and leases placed on it.
  int node = m_.nodes.Index(m.node_id);
  if (node < 0 || !m_.nodes.FromNode(m.node_id, m.node_secret, "worker event", false)) return;
  // Acknowledged once what it changed is stored (the node sends it again until then; never
  // a refusal, which a node reads as the head refusing the node): taken but unstored, it
  // would die with this head, and the restarted head would have the actor pending for good.
  // Handling a resend changes nothing.
  HandleWorkerEvent(m, node);
  m_.ctx.AckWhenStored(m.reply_to, m.request_id);
}

void HeadService::HandleWorkerEvent(proto::WorkerEventMsg& m, int node) {
  m.cause = records::EscapeUtf8(m.cause);  // error text: any bytes, kept escaped
  m.address = records::EscapeUtf8(m.address);
  double now = Now();
  switch (proto::WorkerEventKind(m.kind)) {
    case proto::WorkerEventKind::kActorAlive:
      return m_.actors.OnWorkerEvent(m, node, now);
    case proto::WorkerEventKind::kActorDied:
      m_.actors.OnWorkerEvent(m, node, now);
      return m_.queue.ScheduleAll(now);
    case proto::WorkerEventKind::kLeaseWorkerDied:
    case proto::WorkerEventKind::kLeaseFailed:
      return m_.leases.OnWorkerEvent(m, node, now);
    case proto::WorkerEventKind::kProcessExited:
      return m_.leases.RequesterGone(m.control_address, now);
  }
}

void HeadService::Tick() {
  double now = Now();
  m_.queue.ScheduleAll(now);
  CheckHealth(now);
  m_.submissions.Tick(WallSeconds());
  m_.pgs.Tick(now);
  m_.actors.Tick(now);
  if (retention_) retention_->Trim(now, WallSeconds());
  if (metrics_ && now - metrics_rendered_ >= 1.0) {
    metrics_rendered_ = now;
    metrics_->SetSnapshot(HeadMetricsText(m_, *options_.store));
  }
}

}  // namespace orrery::scheduler
