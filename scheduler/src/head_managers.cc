#include "scheduler/src/head_managers.h"

namespace orrery::scheduler {

HeadManagers::HeadManagers(HeadContext context, std::string binary_dir)
    : ctx(std::move(context)),
      nodes(ctx),
      queue(ctx),
      pgs(ctx, nodes, queue),
      jobs(ctx, std::move(binary_dir)),
      records(ctx),
      book(nodes, pgs, &autoscaler),
      actors(ctx, nodes, book, queue, jobs),
      leases(ctx, nodes, book, queue, jobs, pgs),
      submissions(ctx, nodes, jobs) {
  queue.SetSource(DemandKind::kActor, &actors);
  queue.SetSource(DemandKind::kLease, &leases);
  queue.SetSource(DemandKind::kPg, &pgs);
  pgs.SetOnRemoved([this](const std::string& pg_id) { actors.PlacementGroupRemoved(pg_id); });
  jobs.SetOnEnded(
      [this](const std::string& job_id, const std::string&) { JobEnded(job_id, Now()); });
}

void HeadManagers::NodeDied(int i, const std::string& cause, double now) {
  nodes.MarkDead(i, cause);
  actors.NodeDied(i, cause, now);
  leases.NodeDied(i, cause);
  submissions.NodeDied(i, cause, WallSeconds());
  nodes.FreeAll(i);
  queue.ScheduleAll(now);
}

void HeadManagers::JobEnded(const std::string& job_id, double now) {
  actors.JobEnded(job_id);
  leases.JobEnded(job_id);
  queue.ScheduleAll(now);
}

Result<std::map<std::string, TableRecords>> ReadTables(StateStore& store) {
  std::map<std::string, TableRecords> tables;
  // train_runs and submissions are read only for their records to expire (retention.h).
  for (const char* table : {"pending", "nodes", "placement_groups", "jobs", "actors", "leases",
                            "train_runs", "submissions"}) {
    auto records = store.GetAll(table);
    if (!records.ok()) return records.status();
    tables[table] = std::move(records.value());
  }
  return tables;
}

bool HeadManagers::Forget(const std::string& table, const std::string& key) {
  if (table == "nodes") return nodes.Forget(key);
  if (table == "actors") return actors.Forget(key);
  if (table == "jobs") {
    if (actors.HasLiveActors(UniqueId::FromHex(key).Binary())) return false;
    return jobs.Forget(key);
  }
  if (table == "train_runs") records.Forget(key);
  if (table == "submissions") return submissions.Forget(key);
  return true;
}

void HeadManagers::Restore(std::map<std::string, TableRecords>& tables, double now) {
  queue.DropStoredRecords(tables["pending"]);  // the previous head's queue; this one writes its own
  nodes.Restore(tables["nodes"], now);
  pgs.Restore(tables["placement_groups"], now);
  jobs.Restore(tables["jobs"], now);
  actors.Restore(tables["actors"], now);
  leases.Restore(tables["leases"], now);
  submissions.Restore(tables["submissions"], WallSeconds());
}

}  // namespace orrery::scheduler
