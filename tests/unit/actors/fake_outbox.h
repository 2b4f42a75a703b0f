// A recording Outbox for the client runtime's unit tests: every message is kept (decodable
// by type), and an optional hook decides what each send returns and may answer it.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/src/submission.h"
#include "core/src/protocol.h"
#include "core/src/transport.h"

namespace orrery::runtime::testing {

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

class FakeOutbox final : public Outbox {
 public:
  // Runs for every message, outside the outbox's lock; its status is TrySend's.
  std::function<Status(const SentMessage&)> on_send;

  Status TrySendFrame(const std::string& address, const std::string& frame0,
                      const std::string* payload) override {
    auto header = proto::DecodeHeader(frame0.data(), frame0.size());
    if (!header.ok()) throw std::runtime_error("a malformed frame was sent");
    SentMessage m{address, header->type, std::string(header->meta), std::nullopt};
    if (payload) m.payload = *payload;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sent_.push_back(m);
    }
    return on_send ? on_send(m) : Status::Ok();
  }
  void SendFrame(const std::string& address, const std::string& frame0,
                 const std::string* payload) override {
    (void)TrySendFrame(address, frame0, payload);
  }
  void MarkPeerGone(const std::string& address) override {
    std::lock_guard<std::mutex> lock(mu_);
    gone_.push_back(address);
  }

  std::vector<SentMessage> Sent(std::optional<proto::MsgType> type = std::nullopt) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<SentMessage> out;
    for (const auto& m : sent_)
      if (!type || m.type == *type) out.push_back(m);
    return out;
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
  std::vector<SentMessage> sent_;
  std::vector<std::string> gone_;
};

// An inbox message as the transport would deliver it.
template <typename Meta>
transport::Envelope MakeEnvelope(proto::MsgType type, const Meta& meta) {
  std::string frame0 = proto::EncodeFrame(type, meta);
  transport::Envelope env;
  env.type = type;
  env.frame0 = zmq::message_t(frame0.data(), frame0.size());
  return env;
}

}  // namespace orrery::runtime::testing
