#include "actors/src/submission.h"

#include "core/src/transport.h"

namespace orrery::runtime {

namespace {
class TransportOutboxImpl final : public Outbox {
 public:
  Status TrySendFrame(const std::string& address, const std::string& frame0,
                      const std::string* payload) override {
    return transport::TrySendFrames(address, frame0, payload);
  }
  void SendFrame(const std::string& address, const std::string& frame0,
                 const std::string* payload) override {
    transport::SendFrames(address, frame0, payload);
  }
  void MarkPeerGone(const std::string& address) override { transport::MarkPeerGone(address); }
};
}  // namespace

Outbox& TransportOutbox() {
  static TransportOutboxImpl* outbox = new TransportOutboxImpl();  // never destroyed
  return *outbox;
}

}  // namespace orrery::runtime
