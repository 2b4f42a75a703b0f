#include "cli/src/list_workers.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/src/head_request.h"
#include "core/internal/listings.h"
#include "orrery/orrery.h"

namespace orrery::cli {

namespace {

constexpr int kPerNodeTimeoutMs = 5000;

bool Prefixed(const std::string& value, const std::string& want) {
  return want.empty() || value.rfind(want, 0) == 0;
}

}  // namespace

int ListWorkers(const WorkerFilter& filter, bool json) {
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::string> errors;
  for (const auto& n : Nodes()) {
    if (!n.alive || !Prefixed(n.node_id.Hex(), filter.node)) continue;
    auto reply = Ask<proto::ListWorkersReplyMsg>(
        n.address, proto::MsgType::kListWorkers, proto::ListWorkersMsg{},
        proto::MsgType::kListWorkersReply, kPerNodeTimeoutMs);
    if (!reply.ok()) {
      errors.push_back("node " + n.node_id.Hex().substr(0, 12) + ": " + reply.status().message());
      continue;
    }
    if (reply->truncated)
      errors.push_back("node " + n.node_id.Hex().substr(0, 12) + ": list cut at " +
                       std::to_string(proto::kMaxListedWorkers) + " workers");
    for (const auto& w : reply->workers) {
      if (!filter.state.empty() && w.state != filter.state) continue;
      if (!Prefixed(w.job_id, filter.job)) continue;
      rows.push_back(listings::WorkerRow(n.node_id.Hex(), w));
    }
  }
  if (json) {
    std::cout << rows.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    for (const auto& r : rows) {
      std::cout << r["node_id"].get<std::string>().substr(0, 12) << "  " << r["pid"] << "  "
                << r["kind"].get<std::string>() << "  " << r["state"].get<std::string>() << "  "
                << r["name"].get<std::string>() << "  job " << r["job_id"].get<std::string>()
                << (r["actor_id"].get<std::string>().empty()
                        ? ""
                        : "  actor " + r["actor_id"].get<std::string>())
                << "\n";
    }
    if (rows.empty()) std::cout << "(none)\n";
  }
  for (const auto& e : errors) std::cerr << "orrery list workers: " << e << "\n";
  return 0;
}

int ListTasks(const std::map<std::string, std::string>& drivers, const WorkerFilter& filter,
              bool json) {
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::string> errors;
  for (const auto& [job, address] : drivers) {
    if (!Prefixed(job, filter.job) || address.rfind("tcp://", 0) != 0) continue;
    auto reply =
        Ask<proto::ListTasksReplyMsg>(address, proto::MsgType::kListTasks, proto::ListTasksMsg{},
                                      proto::MsgType::kListTasksReply, kPerNodeTimeoutMs);
    if (!reply.ok()) {
      errors.push_back("job " + job.substr(0, 12) + ": " + reply.status().message());
      continue;
    }
    if (reply->truncated)
      errors.push_back("job " + job.substr(0, 12) + ": only its newest " +
                       std::to_string(proto::kMaxListedTasks) + " tasks are kept");
    for (const auto& t : reply->tasks) {
      if (!filter.state.empty() && t.state != filter.state) continue;
      rows.push_back(listings::TaskRow(job, t));
    }
  }
  if (json) {
    std::cout << rows.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    for (const auto& r : rows) {
      std::cout << r["task_id"].get<std::string>() << "  " << r["state"].get<std::string>() << "  "
                << r["kind"].get<std::string>() << "  " << r["name"].get<std::string>() << "  job "
                << r["job_id"].get<std::string>().substr(0, 12)
                << (r["error"].get<std::string>().empty() ? ""
                                                          : "  " + r["error"].get<std::string>())
                << "\n";
    }
    if (rows.empty()) std::cout << "(none)\n";
  }
  for (const auto& e : errors) std::cerr << "orrery list tasks: " << e << "\n";
  return 0;
}

}  // namespace orrery::cli
