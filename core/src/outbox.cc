#include "core/internal/outbox.h"

#include "core/internal/transport.h"

namespace orrery {

namespace {
class TransportOutboxImpl final : public Outbox {
 public:
  Status TrySendFrame(const std::string& to, const std::string& frame0,
                      const std::string* payload) override {
    return transport::TrySendFrames(to, frame0, payload);
  }
  Status TrySendUnorderedFrame(const std::string& to, const std::string& frame0,
                               const std::string* payload) override {
    return transport::TrySendFrames(to, frame0, payload, transport::Order::kAny);
  }
  void SendFrame(const std::string& to, const std::string& frame0,
                 const std::string* payload) override {
    transport::SendFrames(to, frame0, payload);
  }
  void MarkPeerGone(const std::string& to) override { transport::MarkPeerGone(to); }
};
}  // namespace

Outbox& TransportOutbox() {
  static TransportOutboxImpl* outbox = new TransportOutboxImpl();  // never destroyed
  return *outbox;
}

}  // namespace orrery
