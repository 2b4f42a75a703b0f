// The one fake of orrery::Outbox (core/internal/outbox.h) for unit tests of the head's
// managers, the node's parts and the client runtime: every message is kept, decodable by
// type; a test may take them one by one (Take), look at all (Sent), and decide what each
// send returns (on_send: refuse it, or answer it).
#pragma once

#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/internal/outbox.h"
#include "core/internal/protocol.h"
#include "core/internal/transport.h"

namespace orrery::testing {

struct SentMessage {
  std::string address;
  proto::MsgType type = proto::MsgType::kError;
  std::string meta;
  std::optional<std::string> payload;

  template <typename T>
  T As() const {
    T out;
    Status s = proto::DecodeMeta(meta, &out);
    if (!s.ok()) throw std::runtime_error(s.message());
    return out;
  }
  // Every request starts with its request_id (MSGPACK_DEFINE order).
  uint64_t RequestId() const {
    msgpack::object_handle oh = msgpack::unpack(meta.data(), meta.size());
    return oh.get().via.array.ptr[0].as<uint64_t>();
  }
};

class RecordingOutbox final : public Outbox {
 public:
  // Runs for every message, outside the outbox's lock; its status is TrySend's (a message it
  // refuses is still recorded, as sent and refused).
  std::function<Status(const SentMessage&)> on_send;

  Status TrySendFrame(const std::string& to, const std::string& frame0,
                      const std::string* payload) override {
    auto header = proto::DecodeHeader(frame0.data(), frame0.size());
    if (!header.ok()) throw std::runtime_error("a malformed frame was sent");
    SentMessage m{to, header->type, std::string(header->meta), std::nullopt};
    if (payload) m.payload = *payload;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sent_.push_back(m);
    }
    return on_send ? on_send(m) : Status::Ok();
  }
  void SendFrame(const std::string& to, const std::string& frame0,
                 const std::string* payload) override {
    (void)TrySendFrame(to, frame0, payload);
  }
  void MarkPeerGone(const std::string& to) override {
    std::lock_guard<std::mutex> lock(mu_);
    gone_.push_back(to);
  }

  // Every message sent (of `type`), oldest first; they stay recorded.
  std::vector<SentMessage> Sent(std::optional<proto::MsgType> type = std::nullopt) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<SentMessage> out;
    for (const auto& m : sent_)
      if (!type || m.type == *type) out.push_back(m);
    return out;
  }
  // Takes (removes) the oldest message of `type` sent to `to` ("" = anyone), decoded.
  template <typename Meta>
  std::optional<Meta> Take(proto::MsgType type, const std::string& to = "") {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = sent_.begin(); it != sent_.end(); ++it) {
      if (it->type != type || (!to.empty() && it->address != to)) continue;
      Meta m;
      Status s = proto::DecodeMeta(it->meta, &m);
      sent_.erase(it);
      if (!s.ok()) return std::nullopt;
      return m;
    }
    return std::nullopt;
  }
  size_t Count(proto::MsgType type) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& m : sent_) n += m.type == type;
    return n;
  }
  std::vector<std::string> Gone() {
    std::lock_guard<std::mutex> lock(mu_);
    return gone_;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    sent_.clear();
  }

 private:
  std::mutex mu_;
  std::deque<SentMessage> sent_;
  std::vector<std::string> gone_;
};

// An inbox message as the transport would deliver it.
template <typename Meta>
transport::Envelope MakeEnvelope(proto::MsgType type, const Meta& meta,
                                 const std::string* payload = nullptr) {
  std::string frame0 = proto::EncodeFrame(type, meta);
  transport::Envelope env;
  env.type = type;
  env.frame0 = zmq::message_t(frame0.data(), frame0.size());
  if (payload) {
    env.payload = zmq::message_t(payload->data(), payload->size());
    env.has_payload = true;
  }
  return env;
}

}  // namespace orrery::testing
