#include "dashboard/src/live_state.h"

#include <cstdlib>
#include <utility>
#include <vector>

#include "core/internal/ask.h"
#include "core/internal/listings.h"

namespace orrery::dashboard {

namespace {

using nlohmann::json;

bool Prefixed(const std::string& value, const std::string& want) {
  return want.empty() || value.rfind(want, 0) == 0;
}

// The table's parsed records, or why Redis could not give them (in `state`).
std::vector<json> Records(RedisReader* reader, const std::string& address, const char* table,
                          RedisState* state) {
  state->address = address;
  if (!reader) {
    state->error = "no Redis address given";
    return {};
  }
  auto rows = reader->GetTable(table);
  state->ok = rows.ok();
  if (!rows.ok()) {
    state->error = rows.status().message();
    return {};
  }
  return ParseRecords(rows.value());
}

// Where the dashboard listens for answers, as a driver would: $ORRERY_NODE_IP, else
// 127.0.0.1 (nodes on other hosts need the former to reach it).
std::string AnswerHost() {
  const char* ip = std::getenv("ORRERY_NODE_IP");
  return ip && *ip ? ip : "127.0.0.1";
}

// Asks each target (id, address) in turn for its listing (`Msg`, answered `Reply`), at most
// kMaxAsked of them; `take` gets each answer; what went wrong goes to `errors`, naming the
// target as "<what> <id>".
template <typename Reply, typename Msg, typename Take>
void AskEach(const std::vector<std::pair<std::string, std::string>>& targets, const char* what,
             proto::MsgType type, proto::MsgType reply_type, json* errors, Take take) {
  size_t asked = 0;
  for (const auto& [id, address] : targets) {
    if (address.rfind("tcp://", 0) != 0) continue;
    if (++asked > kMaxAsked) {
      errors->push_back("only the first " + std::to_string(kMaxAsked) + " were asked");
      return;
    }
    auto reply = Ask<Reply>(AnswerHost(), address, type, Msg{}, reply_type, kAskTimeoutMs);
    if (!reply.ok()) {
      errors->push_back(std::string(what) + " " + id.substr(0, 12) + ": " +
                        reply.status().message());
      continue;
    }
    take(id, reply.value());
  }
}

}  // namespace

json WorkersResponse(RedisReader* reader, const std::string& redis_address,
                     const LiveFilter& filter) {
  RedisState state;
  std::vector<std::pair<std::string, std::string>> nodes;
  for (const auto& n : Records(reader, redis_address, "nodes", &state)) {
    std::string id = n.value("node_id", "");
    if (n.value("alive", false) && Prefixed(id, filter.node))
      nodes.emplace_back(id, n.value("address", ""));
  }
  json rows = json::array(), errors = json::array();
  AskEach<proto::ListWorkersReplyMsg, proto::ListWorkersMsg>(
      nodes, "node", proto::MsgType::kListWorkers, proto::MsgType::kListWorkersReply, &errors,
      [&](const std::string& id, const proto::ListWorkersReplyMsg& reply) {
        for (const auto& w : reply.workers) {
          if ((filter.state.empty() || w.state == filter.state) && Prefixed(w.job_id, filter.job))
            rows.push_back(listings::WorkerRow(id, w));
        }
      });
  return {{"redis", RedisJson(state)}, {"workers", std::move(rows)}, {"errors", std::move(errors)}};
}

json TasksResponse(RedisReader* reader, const std::string& redis_address,
                   const LiveFilter& filter) {
  RedisState state;
  std::vector<std::pair<std::string, std::string>> drivers;
  for (const auto& j : Records(reader, redis_address, "jobs", &state)) {
    std::string id = j.value("job_id", "");
    if (j.value("state", "") == "RUNNING" && Prefixed(id, filter.job))
      drivers.emplace_back(id, j.value("driver_address", ""));
  }
  json rows = json::array(), errors = json::array();
  AskEach<proto::ListTasksReplyMsg, proto::ListTasksMsg>(
      drivers, "job", proto::MsgType::kListTasks, proto::MsgType::kListTasksReply, &errors,
      [&](const std::string& id, const proto::ListTasksReplyMsg& reply) {
        for (const auto& t : reply.tasks)
          if (filter.state.empty() || t.state == filter.state)
            rows.push_back(listings::TaskRow(id, t));
      });
  return {{"redis", RedisJson(state)}, {"tasks", std::move(rows)}, {"errors", std::move(errors)}};
}

}  // namespace orrery::dashboard
