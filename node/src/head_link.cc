#include "node/src/head_link.h"

#include <chrono>

#include "core/internal/log.h"

namespace orrery::node {

void HeadLink::Send(const proto::RegisterNodeMsg& reg) {
  {
    MutexLock lock(&mu_);
    if (!refused_.ok()) return;  // the head said no: asking again would be refused again
  }
  outbox_.Send(head_address_, proto::MsgType::kRegisterNode, reg);
}

Status HeadLink::OnAck(const proto::AckMsg& ack) {
  bool report = false;
  Status refused;
  {
    MutexLock lock(&mu_);
    if (ack.ok) {
      if (refused_.ok()) registered_ = true;
    } else if (refused_.ok()) {
      std::string reason = ack.message.empty() ? "no reason given" : ack.message;
      refused_ = Status::PermissionDenied("the head at " + head_address_ +
                                          " refused this node: " + reason);
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

Status HeadLink::WaitRegistered(int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  MutexLock lock(&mu_);
  while (!registered_ && refused_.ok() && cv_.WaitUntil(&mu_, deadline)) {
  }
  if (!refused_.ok()) return refused_;
  if (!registered_)
    return Status::Unavailable("the head at " + head_address_ +
                               " did not answer the node's registration");
  return Status::Ok();
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
