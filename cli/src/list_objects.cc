#include "cli/src/list_objects.h"

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "cli/src/head_request.h"
#include "core/internal/protocol.h"
#include "core/internal/transport.h"
#include "orrery/config.h"
#include "orrery/orrery.h"

namespace orrery::cli {

namespace {

// A reply holds at most kMaxListedObjects entries of a few hundred bytes each.
constexpr long long kMaxReplyBytes = 64ll << 20;

// The answers as they come (the inbox thread writes, the caller waits).
struct Answers {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, size_t> pending;  // request id -> index in nodes, until answered
  std::vector<NodeObjects>* nodes = nullptr;

  // Inbox thread.
  void Take(transport::Envelope& env) {
    if (env.type != proto::MsgType::kListObjectsReply) return;  // nothing else is expected
    proto::ListObjectsReplyMsg reply;
    if (!env.Decode(&reply).ok()) return;  // a node that did not answer in kind: not answered
    std::lock_guard<std::mutex> lock(mu);
    auto it = pending.find(reply.request_id);
    if (it == pending.end()) return;  // not asked, or answered already
    NodeObjects& n = (*nodes)[it->second];
    if (reply.objects.size() > proto::kMaxListedObjects) {
      reply.objects.resize(proto::kMaxListedObjects);
      reply.truncated = true;
    }
    n.reply = std::move(reply);
    n.answered = true;
    pending.erase(it);
    cv.notify_all();
  }
};

}  // namespace

std::vector<NodeObjects> QueryObjects(std::vector<NodeObjects> nodes, const std::string& bind_host,
                                      int timeout_ms) {
  Answers answers;
  answers.nodes = &nodes;
  transport::Inbox inbox;
  inbox.SetMaxMessageBytes(kMaxReplyBytes);
  if (Status s = inbox.Bind(bind_host); !s.ok()) {
    for (auto& n : nodes) n.error = "cannot listen for answers: " + s.message();
    return nodes;
  }
  inbox.Start([&answers](transport::Envelope& env) { answers.Take(env); }, "orrery-list");
  uint64_t next_id = proto::RequestIdBase();
  for (size_t i = 0; i < nodes.size(); ++i) {
    NodeObjects& n = nodes[i];
    if (n.address.rfind("tcp://", 0) != 0) {
      n.error = "not asked: its address is not tcp://host:port";
      continue;
    }
    proto::ListObjectsMsg m{next_id++, inbox.address()};
    {
      std::lock_guard<std::mutex> lock(answers.mu);
      answers.pending[m.request_id] = i;
    }
    if (Status s = transport::TrySend(n.address, proto::MsgType::kListObjects, m); !s.ok()) {
      std::lock_guard<std::mutex> lock(answers.mu);
      answers.pending.erase(m.request_id);
      n.error = "cannot ask it: " + s.message();
    }
  }
  {
    std::unique_lock<std::mutex> lock(answers.mu);
    answers.cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                        [&] { return answers.pending.empty(); });
  }
  inbox.Stop();  // joins the inbox thread: `nodes` is this thread's alone again
  char waited[64];
  std::snprintf(waited, sizeof(waited), "did not answer within %g s", timeout_ms / 1000.0);
  for (const auto& [id, i] : answers.pending) nodes[i].error = waited;
  transport::CloseThreadSockets();
  return nodes;
}

int ListObjects(bool json) {
  std::vector<NodeObjects> nodes;
  for (const auto& n : Nodes()) {
    if (!n.alive) continue;
    NodeObjects o;
    o.node_id = n.node_id.Hex();
    o.address = n.address;
    nodes.push_back(std::move(o));
  }
  // The host the CLI's runtime listens on (Init's rule): the nodes reach it as the head does.
  nodes = QueryObjects(std::move(nodes), AnswerHost(), kListObjectsTimeoutMs);
  if (json) {
    std::cout << ObjectsJson(nodes).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  } else {
    std::cout << FormatObjects(nodes);
  }
  return 0;
}

}  // namespace orrery::cli
