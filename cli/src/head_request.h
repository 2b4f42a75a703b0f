// One request from the CLI to the head, a node or a driver and its answer, over the CLI's
// own inbox (docs/cli.md): `orrery job submit|stop`, `orrery list workers|tasks`.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "core/src/protocol.h"
#include "core/src/transport.h"
#include "orrery/status.h"

namespace orrery::cli {

// The largest answer taken (a listing of 10,000 tasks or workers fits many times).
inline constexpr long long kMaxAnswerBytes = 64ll << 20;

// The host the CLI listens on for answers (Init's rule: $ORRERY_NODE_IP, else 127.0.0.1).
std::string AnswerHost();

// Sends `meta` (type `type`, its request_id and reply_to filled in) to `to`, again every
// second, until an answer of `reply_type` (or kError) with its request id comes, or
// `timeout_ms` passes (Unavailable). `payload` travels with every send.
template <typename Reply, typename Meta>
Result<Reply> Ask(const std::string& to, proto::MsgType type, Meta meta, proto::MsgType reply_type,
                  int timeout_ms, const std::string* payload = nullptr) {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Result<Reply>> answer;
  transport::Inbox inbox;
  inbox.SetMaxMessageBytes(kMaxAnswerBytes);
  if (orrery::Status s = inbox.Bind(AnswerHost()); !s.ok()) return s;
  meta.request_id = proto::RequestIdBase();
  meta.reply_to = inbox.address();
  inbox.Start(
      [&](transport::Envelope& env) {
        Result<Reply> got = orrery::Status::Internal("");
        if (env.type == proto::MsgType::kError) {
          proto::ErrorMsg e;
          if (!env.Decode(&e).ok() || e.request_id != meta.request_id) return;
          got = orrery::Status::InvalidArgument("refused: " + e.message);
        } else if (env.type == reply_type) {
          Reply r;
          if (!env.Decode(&r).ok() || r.request_id != meta.request_id) return;
          got = std::move(r);
        } else {
          return;
        }
        std::lock_guard<std::mutex> lock(mu);
        if (!answer) answer = std::move(got);
        cv.notify_all();
      },
      "orrery-cli");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_lock<std::mutex> lock(mu);
  while (!answer && std::chrono::steady_clock::now() < deadline) {
    lock.unlock();
    orrery::Status sent = transport::TrySend(to, type, meta, payload);
    lock.lock();
    if (!sent.ok()) answer = Result<Reply>(sent);
    cv.wait_until(lock,
                  std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1)),
                  [&] { return answer.has_value(); });
  }
  lock.unlock();
  inbox.Stop();
  if (!answer)
    return orrery::Status::Unavailable(to + " did not answer within " +
                                       std::to_string(timeout_ms / 1000) + " s");
  return std::move(*answer);
}

}  // namespace orrery::cli
