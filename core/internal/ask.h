// One request and its answer over an inbox of the caller's own (docs/protocol.md): what the
// CLI and the dashboard use to ask the head, a node or a driver something (`orrery job
// submit|stop`, `orrery list workers|tasks`, the dashboard's /api/workers and /api/tasks).
// Uses this process's credentials (set before the call).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "core/internal/protocol.h"
#include "core/internal/transport.h"
#include "orrery/status.h"

namespace orrery {

// The largest answer taken (a listing of 10,000 tasks or workers fits many times).
inline constexpr long long kMaxAnswerBytes = 64ll << 20;

// Sends `meta` (type `type`, its request_id and reply_to filled in) to `to`, again every
// second, until an answer of `reply_type` (or kError) with its request id comes to an inbox
// bound on `bind_host`, or `timeout_ms` passes (Unavailable). `payload` goes with every send.
template <typename Reply, typename Meta>
Result<Reply> Ask(const std::string& bind_host, const std::string& to, proto::MsgType type,
                  Meta meta, proto::MsgType reply_type, int timeout_ms,
                  const std::string* payload = nullptr) {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Result<Reply>> answer;
  transport::Inbox inbox;
  inbox.SetMaxMessageBytes(kMaxAnswerBytes);
  if (orrery::Status s = inbox.Bind(bind_host); !s.ok()) return s;
  meta.request_id = proto::RequestIdBase();
  meta.reply_to = inbox.address();
  const uint64_t request_id = meta.request_id;
  inbox.Start(
      [&](transport::Envelope& env) {
        Result<Reply> got = orrery::Status::Internal("");
        if (env.type == proto::MsgType::kError) {
          proto::ErrorMsg e;
          if (!env.Decode(&e).ok() || e.request_id != request_id) return;
          got = orrery::Status::InvalidArgument("refused: " + e.message);
        } else if (env.type == reply_type) {
          Reply r;
          if (!env.Decode(&r).ok() || r.request_id != request_id) return;
          got = std::move(r);
        } else {
          return;
        }
        std::lock_guard<std::mutex> lock(mu);
        if (!answer) answer = std::move(got);
        cv.notify_all();
      },
      "orrery-ask");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_lock<std::mutex> lock(mu);
  while (!answer && std::chrono::steady_clock::now() < deadline) {
    lock.unlock();
    orrery::Status sent = transport::TrySend(to, type, meta, payload);
    lock.lock();
    if (!sent.ok() && !answer) answer = Result<Reply>(sent);
    cv.wait_until(lock,
                  std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1)),
                  [&] { return answer.has_value(); });
  }
  lock.unlock();
  inbox.Stop();
  if (!answer) {
    return orrery::Status::Unavailable(to + " did not answer within " +
                                       std::to_string(timeout_ms / 1000) + " s");
  }
  return std::move(*answer);
}

}  // namespace orrery
