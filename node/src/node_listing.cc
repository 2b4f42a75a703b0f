// `orrery list workers` on the node (node_service.h): its worker processes and the
// submitted jobs' drivers.
#include "node/internal/node_service.h"

namespace orrery::node {

using proto::MsgType;

void NodeService::OnListWorkers(const proto::ListWorkersMsg& m) {
  if (m.reply_to.empty()) return;
  proto::ListWorkersReplyMsg reply;
  reply.request_id = m.request_id;
  reply.node_id = id_.Hex();
  for (const auto& [id, w] : pool_->workers()) {
    if (reply.workers.size() >= proto::kMaxListedWorkers) {
      reply.truncated = true;
      break;
    }
    proto::WorkerInfoMsg info;
    info.pid = w.pid;
    info.kind = w.is_actor ? "actor" : w.spare ? "prestarted" : "task";
    info.state = w.kill_requested                ? "STOPPING"
                 : w.spare && !w.address.empty() ? "IDLE"
                 : !w.ready                      ? "STARTING"
                 : w.is_actor || w.has_lease     ? "BUSY"
                                                 : "IDLE";
    proto::LogLinesMsg source = WorkerPool::LogSource(w);
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
