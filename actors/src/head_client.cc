#include "actors/src/head_client.h"

#include <algorithm>

#include "core/internal/clock.h"

namespace orrery::runtime {

using proto::MsgType;

namespace {
// Every request/reply message starts with its request_id (MSGPACK_DEFINE order).
uint64_t RequestIdOf(const transport::Envelope& env) {
  try {
    auto meta = env.meta();
    msgpack::object_handle oh =
        internal::UnpackUntrusted(meta.data(), meta.size(), internal::kControlUnpackLimits);
    const msgpack::object& o = oh.get();
    if (o.type == msgpack::type::ARRAY && o.via.array.size > 0)
      return o.via.array.ptr[0].as<uint64_t>();
  } catch (const std::exception&) {
  }
  return 0;
}
}  // namespace

HeadClient::HeadClient(Outbox& outbox, std::string head_address, int resend_ms)
    : outbox_(outbox),
      head_address_(std::move(head_address)),
      resend_ms_(resend_ms),
      unacknowledged_(outbox_, head_address_, "a message", resend_ms / 1000.0, kGiveUpS) {}

std::shared_ptr<transport::Envelope> HeadClient::Exchange(MsgType type, uint64_t id,
                                                          const std::string& frame0,
                                                          const std::string* payload,
                                                          int timeout_ms) {
  {
    MutexLock lock(&mu_);
    replies_[id] = nullptr;
  }
  // Resent every resend_ms until answered: a request sent just as the head died is lost
  // with its connection, and the head's handlers are idempotent, so a resend never acts
  // twice.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool done = false;
  Status sent = Status::Ok();
  while (!done && std::chrono::steady_clock::now() < deadline) {
    sent = outbox_.TrySendFrame(head_address_, frame0, payload);
    // A head of another protocol version refused this process: no resend will change that.
    if (sent.code() == StatusCode::kIncompatible) {
      MutexLock lock(&mu_);
      replies_.erase(id);
      throw ConnectionError(sent.message());
    }
    MutexLock lock(&mu_);
    auto wake = std::min(deadline,
                         std::chrono::steady_clock::now() + std::chrono::milliseconds(resend_ms_));
    bool woken = true;
    while (replies_[id] == nullptr && woken) woken = cv_.WaitUntil(&mu_, wake);
    done = replies_[id] != nullptr;
  }
  std::shared_ptr<transport::Envelope> env;
  {
    // A reply that comes after the last wait is dropped with the entry, as one after the
    // deadline always is: `done` decides.
    MutexLock lock(&mu_);
    env = replies_[id];
    replies_.erase(id);
  }
  if (!done) {
    throw ConnectionError(std::string("the head at ") + head_address_ + " did not answer " +
                          proto::TypeName(type) + " within " + std::to_string(timeout_ms / 1000.0) +
                          " s" + (sent.ok() ? std::string() : " (" + sent.message() + ")"));
  }
  return env;
}

bool HeadClient::Complete(transport::Envelope& env) {
  uint64_t request_id = RequestIdOf(env);
  if (Acknowledge(request_id, env)) return true;
  {
    MutexLock lock(&mu_);
    auto it = replies_.find(request_id);
    if (it == replies_.end()) return false;  // the caller gave up
    it->second = std::make_shared<transport::Envelope>(std::move(env));
  }
  cv_.NotifyAll();
  return true;
}

bool HeadClient::Acknowledge(uint64_t request_id, transport::Envelope& env) {
  proto::AckMsg ack;
  std::function<void(const proto::AckMsg&)> on_refused;
  {
    MutexLock lock(&mu_);
    if (!unacknowledged_.Has(request_id)) return false;
    // Anything else under its id is not its answer: it stays, to be sent again.
    if (env.type != MsgType::kAck || !env.Decode(&ack).ok()) return true;
    unacknowledged_.Remove(request_id);
    auto it = on_refused_.find(request_id);
    if (it != on_refused_.end()) {
      if (!ack.ok) on_refused = std::move(it->second);
      on_refused_.erase(it);
    }
  }
  if (on_refused) on_refused(ack);
  return true;
}

void HeadClient::ResendUnacknowledged(double now) {
  MutexLock lock(&mu_);
  for (uint64_t dropped : unacknowledged_.Resend(now)) on_refused_.erase(dropped);
}

void HeadClient::Keep(uint64_t request_id, std::string frame0,
                      std::function<void(const proto::AckMsg&)> on_refused) {
  {
    MutexLock lock(&mu_);  // kept before it goes, so that its acknowledgement finds it
    unacknowledged_.Keep(request_id, frame0, MonotonicSeconds());
    if (on_refused) on_refused_[request_id] = std::move(on_refused);
  }
  outbox_.SendFrame(head_address_, frame0, nullptr);
}

// ------------------------------------------------------------------ RPCs

proto::AckMsg HeadClient::CreateNamedActor(proto::CreateActorMsg m) {
  return Call<proto::AckMsg>(MsgType::kCreateActor, std::move(m), MsgType::kAck);
}

proto::NamedActorMsg HeadClient::GetNamedActor(proto::NamedActorMsg m) {
  return Call<proto::NamedActorMsg>(MsgType::kGetNamedActor, std::move(m),
                                    MsgType::kGetNamedActorReply);
}

proto::PlacementGroupReplyMsg HeadClient::PlacementGroup(MsgType type, proto::PlacementGroupMsg m,
                                                         int timeout_ms) {
  return Call<proto::PlacementGroupReplyMsg>(type, std::move(m), MsgType::kPlacementGroupReply,
                                             timeout_ms);
}

std::vector<proto::NodeInfoMsg> HeadClient::ClusterInfo(int timeout_ms) {
  return FullClusterInfo(timeout_ms).nodes;
}

proto::ClusterInfoMsg HeadClient::FullClusterInfo(int timeout_ms) {
  return Call<proto::ClusterInfoMsg>(MsgType::kGetClusterInfo, proto::ClusterInfoMsg{},
                                     MsgType::kClusterInfoReply, timeout_ms);
}

proto::AckMsg HeadClient::RegisterJob(proto::JobMsg m, int timeout_ms) {
  return Call<proto::AckMsg>(MsgType::kRegisterJob, std::move(m), MsgType::kAck, timeout_ms);
}

proto::AckMsg HeadClient::PutBinary(proto::BinaryMsg m, const std::string& bytes) {
  // An executable takes a while to store: a longer deadline than a control RPC's.
  constexpr int kPutBinaryTimeoutMs = 120000;
  return Call<proto::AckMsg>(MsgType::kPutBinary, std::move(m), MsgType::kAck, kPutBinaryTimeoutMs,
                             &bytes);
}

Status HeadClient::PutRecord(proto::RecordMsg record, int timeout_ms) {
  try {
    auto ack =
        Call<proto::AckMsg>(MsgType::kPutRecord, std::move(record), MsgType::kAck, timeout_ms);
    return ack.ok ? Status::Ok() : Status::InvalidArgument(ack.message);
  } catch (const Error& e) {
    return Status::Unavailable(e.what());
  }
}

// ------------------------------------------------------------------ sent without waiting

void HeadClient::CreateActor(proto::CreateActorMsg m,
                             std::function<void(const proto::AckMsg&)> on_refused) {
  SendUntilAcknowledged(MsgType::kCreateActor, std::move(m), std::move(on_refused));
}

void HeadClient::KillActor(const ActorId& actor, bool no_restart) {
  proto::KillActorMsg m;
  m.actor_id = actor.Binary();
  m.no_restart = no_restart;
  SendUntilAcknowledged(MsgType::kKillActor, std::move(m));
}

void HeadClient::RemovePlacementGroup(const PlacementGroupId& id) {
  proto::PlacementGroupMsg m;
  m.pg_id = id.Binary();
  SendUntilAcknowledged(MsgType::kRemovePlacementGroup, std::move(m));
}

void HeadClient::ReturnLease(const std::string& lease_id, bool failed) {
  proto::ReturnLeaseMsg m;
  m.lease_id = lease_id;
  m.worker_failed = failed;
  SendUntilAcknowledged(MsgType::kReturnLease, std::move(m));
}

void HeadClient::SubscribeActor(const ActorId& actor) {
  outbox_.Send(head_address_, MsgType::kSubscribeActor,
               proto::SubscribeActorMsg{actor.Binary(), reply_to_});
}

void HeadClient::RequestLease(const proto::LeaseRequestMsg& m) {
  outbox_.Send(head_address_, MsgType::kRequestLease, m);
}

void HeadClient::JobHeartbeat(const proto::JobMsg& m) {
  outbox_.Send(head_address_, MsgType::kRegisterJob, m);
}

}  // namespace orrery::runtime
