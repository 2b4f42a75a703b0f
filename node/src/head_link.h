// The node's registration with the head (docs/architecture.md "Node"): the first
// registration that NodeService::Start waits on, the heartbeats that repeat it, the goodbye,
// and the head's answers to them (kAck; the node sends nothing else the head acknowledges).
//
// The head may refuse a node (an Ack with ok=false and its reason: a label that is not
// UTF-8, a node the autoscaler removed). A refused node is not registered: Start fails with
// the reason, and a node refused later, on a heartbeat, stops heartbeating.
//
// The heartbeats leave from a thread of their own (core/internal/heartbeat_thread.h), so
// that a busy inbox (a storm of spawn requests) cannot hold them up: each repeats the latest
// registration the inbox thread left with SetHeartbeat.
//
// Thread-safety: OnAck and Send run on the node's inbox thread; WaitRegistered, refusal,
// SetHeartbeat, the heartbeats' start and stop and TakeRegistered may be called from any
// thread.
#pragma once

#include <functional>
#include <string>

#include "core/internal/heartbeat_thread.h"
#include "core/internal/outbox.h"
#include "core/internal/protocol.h"
#include "core/internal/thread_annotations.h"
#include "orrery/status.h"

namespace orrery::node {

class HeadLink {
 public:
  // `on_refused` runs (on the thread of OnAck, no lock held) when the head refuses the node
  // after Started(): the node has stopped heartbeating and its owner stops it.
  HeadLink(Outbox& outbox, std::string head_address,
           std::function<void(const Status&)> on_refused = nullptr)
      : outbox_(outbox),
        head_address_(std::move(head_address)),
        on_refused_(std::move(on_refused)) {}
  HeadLink(const HeadLink&) = delete;
  HeadLink& operator=(const HeadLink&) = delete;

  const std::string& head_address() const { return head_address_; }

  // Sends a registration (a heartbeat when already registered) or, with node.alive false,
  // the goodbye. Nothing is sent once the head has refused the node. A head of another
  // protocol version refuses the node here: its transport answers in a way every version
  // reads (core/internal/protocol_wire.h).
  void Send(const proto::RegisterNodeMsg& reg) EXCLUDES(mu_);

  // The head's answer. OK when it accepted the node; PermissionDenied with the head's reason
  // when it refused it: the link is then refused for good (WaitRegistered returns that
  // status, Send sends nothing more).
  Status OnAck(const proto::AckMsg& ack) EXCLUDES(mu_);

  // Waits until the head has answered the first registration: OK when it accepted it, the
  // refusal (PermissionDenied, with the head's reason; Incompatible when the head speaks
  // another protocol version) when it refused it, Unavailable when no answer came within
  // timeout_ms. `resend` runs every resend_ms while it waits (registrations are idempotent,
  // and one sent as the head restarts is lost).
  Status WaitRegistered(int timeout_ms, int resend_ms = 1000,
                        const std::function<void()>& resend = nullptr) EXCLUDES(mu_);

  // The node is up (Start returned OK): a refusal from now on is reported to on_refused
  // (before, it is WaitRegistered's answer).
  void Started() EXCLUDES(mu_);

  // The registration the next heartbeats repeat (the node's latest state).
  void SetHeartbeat(proto::RegisterNodeMsg reg) EXCLUDES(mu_);
  // Sends the latest registration every period_s from the heartbeat thread, until
  // StopHeartbeats (before the goodbye).
  void StartHeartbeats(double period_s);
  void StopHeartbeats() { heartbeats_.Stop(); }

  // OK, or the head's refusal.
  Status refusal() const EXCLUDES(mu_);

  // Ends the registration (the node stops): whether the head had accepted it.
  bool TakeRegistered() EXCLUDES(mu_);

 private:
  // Refuses the link for good with `why` (the first refusal stays); reports it once started.
  Status Refuse(const Status& why) EXCLUDES(mu_);

  Outbox& outbox_;
  const std::string head_address_;
  const std::function<void(const Status&)> on_refused_;
  mutable Mutex mu_;
  CondVar cv_;
  bool registered_ GUARDED_BY(mu_) = false;
  bool started_ GUARDED_BY(mu_) = false;
  Status refused_ GUARDED_BY(mu_);  // OK until the head refuses the node
  proto::RegisterNodeMsg heartbeat_ GUARDED_BY(mu_);
  bool has_heartbeat_ GUARDED_BY(mu_) = false;
  HeartbeatThread heartbeats_;  // last: stopped before the rest goes
};

}  // namespace orrery::node
