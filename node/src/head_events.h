// The events a node reports to the head and must not lose, each kept and sent again every
// kResendS until the head acknowledges it: the worker events (kWorkerEvent: an actor alive or
// dead, a lease's worker dead, a process gone) and the submitted jobs' events (kJobEvent:
// started, exited, failed to start). A head that stops as one arrives loses it with its
// connection, and a restarted head drops a node's events until that node's next heartbeat
// (docs/protocol.md "Node-scoped messages"): without the resends an actor could stay
// "pending" at the head for good while its worker runs, or "alive" after its worker died,
// and a job RUNNING after its driver exited.
//
// Not thread-safe: used on the node's inbox thread only.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/internal/outbox.h"
#include "core/internal/protocol.h"
#include "core/internal/resend_book.h"

namespace orrery::node {

class HeadEvents {
 public:
  static constexpr double kResendS = 1.0;
  // Given up (with a warning) after this long without an acknowledgement.
  static constexpr double kGiveUpS = 600;

  // `outbox` outlives this; `what` names its events in the warning of one given up.
  HeadEvents(Outbox& outbox, std::string head_address, std::string what = "a worker event")
      : book_(outbox, std::move(head_address), std::move(what), kResendS, kGiveUpS) {}
  // Where the head's acknowledgements go (the node's inbox); set before the first event.
  void SetReplyTo(std::string node_address) { reply_to_ = std::move(node_address); }

  // Sends `ev` (setting its request_id and reply_to) and keeps it until acknowledged.
  void Send(proto::WorkerEventMsg ev, double now) {
    Keep(proto::MsgType::kWorkerEvent, std::move(ev), now);
  }
  void Send(proto::JobEventMsg ev, double now) {
    Keep(proto::MsgType::kJobEvent, std::move(ev), now);
  }
  // The head's kAck for request `request_id`: true when it was an event's (it is done).
  bool OnAck(uint64_t request_id) { return book_.Remove(request_id); }
  // Sends again the events unacknowledged for kResendS; gives up those past kGiveUpS.
  void Resend(double now) { (void)book_.Resend(now); }
  size_t pending() const { return book_.size(); }

 private:
  template <typename Event>
  void Keep(proto::MsgType type, Event ev, double now) {
    ev.request_id = next_request_++;
    if (ev.request_id == 0) ev.request_id = next_request_++;  // 0 answers a registration
    ev.reply_to = reply_to_;
    book_.Send(ev.request_id, proto::EncodeFrame(type, ev), now);
  }

  ResendBook book_;  // sent in the order they happened: request ids grow
  std::string reply_to_;
  uint64_t next_request_ = proto::RequestIdBase();
};

}  // namespace orrery::node
