#include "node/src/head_link.h"

#include <algorithm>
#include <chrono>

#include "core/internal/log.h"
#include "core/internal/rate_limit.h"

namespace orrery::node {

void HeadLink::Send(const proto::RegisterNodeMsg& reg) {
  {
    MutexLock lock(&mu_);
    if (!refused_.ok()) return;  // the head said no: asking again would be refused again
  }
  Status sent = outbox_.TrySend(head_address_, proto::MsgType::kRegisterNode, reg);
  // A head of another protocol version refused the connection (transport_send.cc).
  if (sent.code() == StatusCode::kIncompatible) {
    (void)Refuse(sent);
  } else if (!sent.ok()) {
    static RateLimitedLog dropped_log;
    uint64_t suppressed = 0;
    if (dropped_log.ShouldLog(&suppressed)) {
      LOG_WARN("a registration to the head was not sent: " + sent.message() +
               RateLimitedLog::More(suppressed));
    }
  }
}

Status HeadLink::OnAck(const proto::AckMsg& ack) {
  if (!ack.ok) {
    std::string reason = ack.message.empty() ? "no reason given" : ack.message;
    return Refuse(
        Status::PermissionDenied("the head at " + head_address_ + " refused this node: " + reason));
  }
  MutexLock lock(&mu_);
  if (refused_.ok()) registered_ = true;
  cv_.NotifyAll();
  return refused_;
}

Status HeadLink::Refuse(const Status& why) {
  bool report = false;
  Status refused;
  {
    MutexLock lock(&mu_);
    if (refused_.ok()) {
      refused_ = why;
      registered_ = false;
      report = started_;
    }
    refused = refused_;
    cv_.NotifyAll();
  }
  if (report) {
    LOG_ERROR("node stops heartbeating: " + refused.message());
    if (on_refused_) on_refused_(refused);
  }
  return refused;
}

void HeadLink::SetHeartbeat(proto::RegisterNodeMsg reg) {
  MutexLock lock(&mu_);
  heartbeat_ = std::move(reg);
  has_heartbeat_ = true;
}

void HeadLink::StartHeartbeats(double period_s) {
  heartbeats_.Start(period_s, [this] {
    proto::RegisterNodeMsg reg;
    {
      MutexLock lock(&mu_);
      if (!has_heartbeat_) return;
      reg = heartbeat_;
    }
    Send(reg);
  });
}

void HeadLink::Started() {
  MutexLock lock(&mu_);
  started_ = true;
}

Status HeadLink::WaitRegistered(int timeout_ms, int resend_ms,
                                const std::function<void()>& resend) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    {
      MutexLock lock(&mu_);
      auto wake = std::min(deadline, std::chrono::steady_clock::now() +
                                         std::chrono::milliseconds(std::max(resend_ms, 1)));
      while (!registered_ && refused_.ok() && cv_.WaitUntil(&mu_, wake)) {
      }
      if (!refused_.ok()) return refused_;
      if (registered_) return Status::Ok();
      if (std::chrono::steady_clock::now() >= deadline) {
        return Status::Unavailable("the head at " + head_address_ +
                                   " did not answer the node's registration");
      }
    }
    if (resend) resend();
  }
}

Status HeadLink::refusal() const {
  MutexLock lock(&mu_);
  return refused_;
}

bool HeadLink::TakeRegistered() {
  MutexLock lock(&mu_);
  bool was = registered_;
  registered_ = false;
  started_ = false;
  return was;
}

}  // namespace orrery::node
