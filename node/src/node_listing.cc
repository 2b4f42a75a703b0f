// What the node's workers are, for `orrery list workers` and their log lines (node_service.h,
// docs/logs.md): what each worker's log lines are attributed to, and the listing of the
// workers and the submitted jobs' drivers.
#include "node/internal/node_service.h"

namespace orrery::node {

using proto::MsgType;

namespace {
std::string HexId(const std::string& binary) {
  return binary.size() == UniqueId::kSize ? UniqueId::FromBinary(binary).Hex() : "";
}
}  // namespace

proto::LogLinesMsg NodeService::LogSource(const Worker& w) const {
  proto::LogLinesMsg s;
  s.pid = w.pid;
  if (w.is_actor) {
    s.job_id = HexId(w.actor.spec.job_id);
    s.actor_id = HexId(w.actor.spec.actor_id);
    // The factory is "Counter::Create": the prefix names the class, as Ray's does.
    s.name = w.actor.spec.factory;
    if (size_t colons = s.name.rfind("::"); colons != std::string::npos && colons > 0)
      s.name.resize(colons);
  } else {
    s.job_id = w.has_lease ? HexId(w.lease.job_id) : "";
    s.name = "task";
  }
  return s;
}

void NodeService::WatchLogs(const Worker& w) {
  if (w.pid <= 0 || !logs_) return;  // no monitor before Start (tests feed Dispatch)
  logs_->Watch(w.pid, options_.log_dir + "/worker-" + std::to_string(w.pid), LogSource(w));
}

void NodeService::OnListWorkers(const proto::ListWorkersMsg& m) {
  if (m.reply_to.empty()) return;
  proto::ListWorkersReplyMsg reply;
  reply.request_id = m.request_id;
  reply.node_id = id_.Hex();
  for (const auto& [id, w] : workers_) {
    if (reply.workers.size() >= proto::kMaxListedWorkers) {
      reply.truncated = true;
      break;
    }
    proto::WorkerInfoMsg info;
    info.pid = w.pid;
    info.kind = w.is_actor ? "actor" : "task";
    info.state = w.kill_requested            ? "STOPPING"
                 : !w.ready                  ? "STARTING"
                 : w.is_actor || w.has_lease ? "BUSY"
                                             : "IDLE";
    proto::LogLinesMsg source = LogSource(w);
    info.job_id = source.job_id;
    info.actor_id = source.actor_id;
    info.lease_id = w.has_lease ? w.lease.lease_id : "";
    info.name = source.name;
    info.start_time = w.wall_started;
    info.resources = w.is_actor ? w.actor.spec.options.resources : w.lease.resources;
    reply.workers.push_back(std::move(info));
  }
  jobs_->List(&reply);
  outbox_.Send(m.reply_to, MsgType::kListWorkersReply, reply);
}

}  // namespace orrery::node
