// Where a component's messages go: the transport's sockets in a process, a recording fake
// (tests/fakes/recording_outbox.h) in unit tests. The head's managers, the node's parts and
// the client runtime's pieces all send through one of these, never through transport::Send
// directly, so each can be tested without sockets (docs/architecture.md "Seams").
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <string>

#include "core/internal/protocol.h"
#include "orrery/status.h"

namespace orrery {

class Outbox {
 public:
  virtual ~Outbox() = default;
  // Sends frame 0 (+ payload) without blocking. Unavailable, with the message dropped, when
  // the queue to that peer or all queues together are full (transport::TrySendFrames).
  [[nodiscard]] virtual Status TrySendFrame(const std::string& to, const std::string& frame0,
                                            const std::string* payload) = 0;
  // Fire-and-forget: a drop is logged, rate-limited (transport::SendFrames).
  virtual void SendFrame(const std::string& to, const std::string& frame0,
                         const std::string* payload) = 0;
  // TrySendFrame for a message that may reach `to` out of order with this thread's others
  // to it (transport::Order::kAny: a call, which its worker orders by sequence number).
  [[nodiscard]] virtual Status TrySendUnorderedFrame(const std::string& to,
                                                     const std::string& frame0,
                                                     const std::string* payload) {
    return TrySendFrame(to, frame0, payload);
  }
  // The peer at `to` is gone for good: drop what is queued for it (transport::MarkPeerGone).
  virtual void MarkPeerGone(const std::string& to) = 0;

  template <typename Meta>
  [[nodiscard]] Status TrySend(const std::string& to, proto::MsgType type, const Meta& meta,
                               const std::string* payload = nullptr) {
    return TrySendFrame(to, proto::EncodeFrame(type, meta), payload);
  }
  template <typename Meta>
  [[nodiscard]] Status TrySendUnordered(const std::string& to, proto::MsgType type,
                                        const Meta& meta, const std::string* payload = nullptr) {
    return TrySendUnorderedFrame(to, proto::EncodeFrame(type, meta), payload);
  }
  template <typename Meta>
  void Send(const std::string& to, proto::MsgType type, const Meta& meta,
            const std::string* payload = nullptr) {
    SendFrame(to, proto::EncodeFrame(type, meta), payload);
  }
};

// The Outbox of a real process: the calling thread's transport sockets. Never destroyed.
Outbox& TransportOutbox();

}  // namespace orrery
