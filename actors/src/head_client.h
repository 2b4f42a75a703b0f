// The client runtime's link to the head (docs/architecture.md "Client runtime"): control
// RPCs that wait for their answer, resending until it comes or the deadline passes, and the
// fire-and-forget messages a driver or worker sends the head.
//
// Thread-safety: every method may be called from any thread; Complete runs on the inbox
// thread. A caller blocks in an RPC without holding any other component's lock.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/src/submission.h"
#include "core/internal/protocol.h"
#include "core/internal/resend_book.h"
#include "core/internal/thread_annotations.h"
#include "core/internal/transport.h"
#include "orrery/errors.h"

namespace orrery::runtime {

class HeadClient {
 public:
  static constexpr int kDefaultResendMs = 1000;
  static constexpr int kDefaultTimeoutMs = 30000;

  // `outbox` outlives the client. `resend_ms`: how long an RPC waits for its answer before
  // sending the request again.
  HeadClient(Outbox& outbox, std::string head_address, int resend_ms = kDefaultResendMs);

  // This process's inbox, where answers come back. Set before the first message (the
  // Runtime does it before its inbox starts); read without a lock afterwards.
  void SetReplyTo(std::string address) { reply_to_ = std::move(address); }
  const std::string& head_address() const { return head_address_; }
  // Request ids start at a random point per process, so that a reply meant for an earlier
  // process on the same address never matches a request of this one.
  uint64_t NextRequestId() { return next_request_++; }

  // ---- RPCs: throw ConnectionError when the head does not answer within timeout_ms, Error
  // when it answers with another message type or a malformed one.
  proto::AckMsg CreateNamedActor(proto::CreateActorMsg m);
  // An empty actor_id: no actor has that name.
  proto::NamedActorMsg GetNamedActor(proto::NamedActorMsg m);
  proto::PlacementGroupReplyMsg PlacementGroup(proto::MsgType type, proto::PlacementGroupMsg m,
                                               int timeout_ms);
  std::vector<proto::NodeInfoMsg> ClusterInfo(int timeout_ms = kDefaultTimeoutMs);
  // The nodes and the autoscaler's groups (docs/autoscaler.md).
  proto::ClusterInfoMsg FullClusterInfo(int timeout_ms = kDefaultTimeoutMs);
  proto::AckMsg RegisterJob(proto::JobMsg m, int timeout_ms = kDefaultTimeoutMs);
  proto::AckMsg PutBinary(proto::BinaryMsg m, const std::string& bytes);
  // Unavailable (never throws) when the head did not answer within timeout_ms.
  Status PutRecord(proto::RecordMsg record, int timeout_ms);

  // ---- sent without waiting, and again until acknowledged
  // The caller does not wait for these, but a message sent as the head stops is lost with
  // its connection: each is kept and sent again every resend_ms (ResendUnacknowledged) until
  // the head acknowledges it, which it does once it has acted on it (a resend of one it has
  // acted on already is acknowledged again), or kGiveUpS passes.
  static constexpr double kGiveUpS = 600;
  // The creation of an unnamed actor. `on_refused` runs on the inbox thread when the head
  // refuses it (the actor is never created).
  void CreateActor(proto::CreateActorMsg m, std::function<void(const proto::AckMsg&)> on_refused)
      EXCLUDES(mu_);
  void KillActor(const ActorId& actor, bool no_restart) EXCLUDES(mu_);
  void RemovePlacementGroup(const PlacementGroupId& id) EXCLUDES(mu_);
  void ReturnLease(const std::string& lease_id, bool failed) EXCLUDES(mu_);
  // Sends again what has waited resend_ms for its acknowledgement; `now` in MonotonicSeconds.
  void ResendUnacknowledged(double now) EXCLUDES(mu_);

  // ---- fire-and-forget: answered by the head in other ways (an actor update, a lease
  // reply), whose callers send them again when that answer does not come.
  void SubscribeActor(const ActorId& actor);
  void RequestLease(const proto::LeaseRequestMsg& m);
  void JobHeartbeat(const proto::JobMsg& m);

  // Inbox thread: an answer (kAck, k...Reply). False when no caller waits for its request
  // id (it gave up, or the answer was not meant for this process).
  bool Complete(transport::Envelope& env) EXCLUDES(mu_);

  // Sends `meta` (with a fresh request_id and this process's reply_to) until the head
  // answers with reply_type or timeout_ms passes.
  template <typename Reply, typename Meta>
  Reply Call(proto::MsgType type, Meta meta, proto::MsgType reply_type,
             int timeout_ms = kDefaultTimeoutMs, const std::string* payload = nullptr) {
    meta.request_id = NextRequestId();
    meta.reply_to = reply_to_;
    auto env = Exchange(type, meta.request_id, proto::EncodeFrame(type, meta), payload, timeout_ms);
    if (env->type != reply_type) {
      throw Error(std::string("the head answered ") + proto::TypeName(type) + " with " +
                  proto::TypeName(env->type));
    }
    Reply reply;
    Status s = env->Decode(&reply);
    if (!s.ok()) throw Error("bad reply from the head: " + s.message());
    return reply;
  }

 private:
  // Sets meta's request_id and reply_to, sends it, and keeps it until acknowledged.
  template <typename Meta>
  void SendUntilAcknowledged(proto::MsgType type, Meta meta,
                             std::function<void(const proto::AckMsg&)> on_refused = nullptr) {
    meta.request_id = NextRequestId();
    meta.reply_to = reply_to_;
    Keep(meta.request_id, proto::EncodeFrame(type, meta), std::move(on_refused));
  }
  void Keep(uint64_t request_id, std::string frame0,
            std::function<void(const proto::AckMsg&)> on_refused) EXCLUDES(mu_);
  // For an answer to what SendUntilAcknowledged sent: true when `request_id` is one (its
  // entry goes with a kAck; on_refused runs when it refuses).
  bool Acknowledge(uint64_t request_id, transport::Envelope& env) EXCLUDES(mu_);
  // Sends frame0 every resend_ms until the answer to request `id` comes (returned) or
  // timeout_ms passes (ConnectionError).
  std::shared_ptr<transport::Envelope> Exchange(proto::MsgType type, uint64_t id,
                                                const std::string& frame0,
                                                const std::string* payload, int timeout_ms)
      EXCLUDES(mu_);

  Outbox& outbox_;
  const std::string head_address_;
  const int resend_ms_;
  std::string reply_to_;
  std::atomic<uint64_t> next_request_{proto::RequestIdBase()};

  Mutex mu_;
  CondVar cv_;
  // The RPCs waiting for an answer, by request id; null until it comes.
  std::map<uint64_t, std::shared_ptr<transport::Envelope>> replies_ GUARDED_BY(mu_);
  // What SendUntilAcknowledged sent and the head has not acknowledged yet, by request id,
  // and the on_refused of those that have one.
  ResendBook unacknowledged_ GUARDED_BY(mu_);
  std::map<uint64_t, std::function<void(const proto::AckMsg&)>> on_refused_ GUARDED_BY(mu_);
};

}  // namespace orrery::runtime
