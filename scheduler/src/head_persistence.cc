// HeadService's side of the state store: what each record holds when written, and the
// rebuild from the records when a head starts (docs/redis-schema.md "Head restart"). The
// records' JSON format and its validation live in records.{h,cc}; every record read back is
// untrusted and one that does not decode is skipped with a warning.
#include <nlohmann/json.hpp>

#include "core/src/clock.h"
#include "core/src/file_hash.h"
#include "core/src/log.h"
#include "orrery/resources.h"
#include "scheduler/src/head_internal.h"
#include "scheduler/src/head_service.h"
#include "scheduler/src/records.h"

namespace orrery::scheduler {

namespace {
template <typename R>
bool Usable(const Result<R>& r, const char* table, const std::string& key) {
  if (r.ok()) return true;
  LOG_WARN(std::string("skipping an unreadable ") + table + " record " + records::EscapeUtf8(key) +
           ": " + r.status().message());
  return false;
}

// A record is filed under its own id (docs/redis-schema.md). One under another key was not
// written by a head: restored, it would shadow or duplicate the record of that id (an actor
// placed twice, its resources held twice), so it is skipped with a warning.
bool FiledUnderItsId(const std::string& id_hex, const char* table, const std::string& key) {
  if (id_hex == key) return true;
  LOG_WARN(std::string("skipping ") + table +
           " record filed under another id: " + records::EscapeUtf8(key) + " holds " + id_hex);
  return false;
}
}  // namespace

int HeadService::NodeIndex(const std::string& hex) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].id.Hex() == hex) return int(i);
  return -1;
}

void HeadService::Recover() {
  double now = MonotonicSeconds();
  StateStore& store = *options_.store;
  // Pending records describe the previous head's queue; this head writes its own.
  for (const auto& [id, text] : store.GetAll("pending")) store.Delete("pending", id);
  for (const auto& [key, text] : store.GetAll("nodes")) {
    auto r = records::ParseNodeRecord(text);
    if (!Usable(r, "node", key)) continue;
    if (r->id.Hex() != key || NodeIndex(key) >= 0) {
      LOG_WARN("skipping a node record filed under another id: " + records::EscapeUtf8(key));
      continue;
    }
    NodeView n{r->id, r->alive, r->total, r->total, r->labels};
    if (!n.alive) n.available.clear();
    nodes_.push_back(n);
    node_memory_[n.id.Binary()] = {r->memory_used_bytes, r->memory_total_bytes,
                                   r->memory_usage_threshold};
    node_addresses_.push_back(r->address);
    node_last_seen_.push_back(now);  // a full grace period to send a heartbeat
  }
  for (const auto& [key, text] : store.GetAll("placement_groups")) {
    auto r = records::ParsePgRecord(text);
    if (!Usable(r, "placement group", key)) continue;
    if (!FiledUnderItsId(Hex(r->spec.pg_id), "a placement group", key)) continue;
    if (r->state == records::PgRecord::kRemoved) continue;
    PgRec pg;
    pg.spec = r->spec;
    if (r->state == records::PgRecord::kCreated) {
      pg.state = PgRec::kCreated;
      pg.bundle_available = pg.spec.bundles;
      for (const auto& hex : r->bundle_nodes) pg.node_of_bundle.push_back(NodeIndex(hex));
      for (size_t b = 0; b < pg.node_of_bundle.size(); ++b) {
        if (pg.node_of_bundle[b] >= 0)
          Subtract(nodes_[pg.node_of_bundle[b]].available, pg.spec.bundles[b]);
      }
    } else {
      pending_.push_back({PendingKind::kPg, pg.spec.pg_id, now});
    }
    if (!pg.spec.name.empty()) pg_names_[pg.spec.name] = pg.spec.pg_id;
    pgs_[pg.spec.pg_id] = std::move(pg);
  }
  // Jobs first: they say which executable each actor and lease may run.
  for (const auto& [key, text] : store.GetAll("jobs")) {
    auto r = records::ParseJobRecord(text);
    if (!Usable(r, "job", key)) continue;
    if (!FiledUnderItsId(Hex(r->info.job_id), "a job", key)) continue;
    if (!r->info.binary_hash.empty() && !IsContentHash(r->info.binary_hash)) {
      LOG_WARN("skipping job record " + records::EscapeUtf8(key) +
               ": its executable hash is not a SHA-256");
      continue;
    }
    JobRec rec;
    rec.info = r->info;
    rec.alive = r->running;
    rec.start_time = r->start_time;
    rec.end_cause = r->end_cause;
    rec.last_seen = now;  // a grace period for its driver to reconnect
    jobs_[rec.info.job_id] = rec;
  }
  for (const auto& [key, text] : store.GetAll("actors")) {
    auto r = records::ParseActorRecord(text);
    if (!Usable(r, "actor", key)) continue;
    if (!FiledUnderItsId(Hex(r->spec.actor_id), "an actor", key)) continue;
    if (r->state != proto::ActorState::kDead) {
      // What a live actor runs must be what its job registered, as this head stored it: a
      // record written by anyone else into the store never names what a node runs.
      if (Status s = CheckExecutable(r->spec.job_id, r->spec.argv, r->spec.binary_hash); !s.ok()) {
        LOG_WARN("skipping actor record " + records::EscapeUtf8(key) + ": " + s.message());
        continue;
      }
    }
    ActorRec a;
    a.spec = std::move(r->spec);
    a.state = r->state;
    a.incarnation = r->incarnation;
    a.restarts_used = r->restarts_used;
    a.kill_requested = r->kill_requested;
    a.death_cause = r->death_cause;
    a.death_kind = r->death_kind;
    a.subscribers.insert(r->subscribers.begin(), r->subscribers.end());
    a.node = r->node_id.empty() ? -1 : NodeIndex(r->node_id);
    a.bundle = r->bundle;
    a.address = r->address;
    a.pid = r->pid;
    if (a.state == proto::ActorState::kDead) {
      if (a.death_kind.empty()) a.death_kind = "ActorDiedError";
      a.node = -1;
    } else {
      if (a.node >= 0) {
        // Placed before the restart: it still holds its resources.
        const auto& o = a.spec.options;
        auto pg = pgs_.find(o.placement_group);
        if (!o.placement_group.empty() && pg != pgs_.end() && a.bundle >= 0 &&
            a.bundle < int(pg->second.bundle_available.size())) {
          Subtract(pg->second.bundle_available[a.bundle], o.resources);
        } else {
          a.bundle = -1;
          Subtract(nodes_[a.node].available, o.resources);
        }
      } else {
        a.bundle = -1;
        pending_.push_back({PendingKind::kActor, a.spec.actor_id, now});
      }
      if (!a.spec.options.name.empty())
        named_[{a.spec.options.namespace_, a.spec.options.name}] = a.spec.actor_id;
    }
    actors_[a.spec.actor_id] = std::move(a);
  }
  // Leases: a granted one still holds its resources on its node or in its bundle (its
  // worker runs on); a pending one waits again. One whose node, job or placement group is
  // gone has nothing left to hold.
  for (const auto& [key, text] : store.GetAll("leases")) {
    auto r = records::ParseLeaseRecord(text);
    if (!Usable(r, "lease", key)) continue;
    auto job = jobs_.find(r->request.job_id);
    int node = r->node_id.empty() ? -1 : NodeIndex(r->node_id);
    bool granted = !r->node_id.empty();
    auto pg = pgs_.find(r->request.placement_group);
    bool in_group = !r->request.placement_group.empty();
    bool group_ok =
        !in_group ||
        (pg != pgs_.end() &&
         (!granted || (r->bundle >= 0 && r->bundle < int(pg->second.bundle_available.size()))));
    Status executable = CheckExecutable(r->request.job_id, r->request.argv, r->request.binary_hash);
    if (!executable.ok())
      LOG_WARN("dropping lease record " + records::EscapeUtf8(key) + ": " + executable.message());
    if (!executable.ok() || Hex(r->request.lease_id) != key || job == jobs_.end() ||
        !job->second.alive || !group_ok || (granted && (node < 0 || !nodes_[node].alive)) ||
        leases_.count(r->request.lease_id)) {
      store.Delete("leases", key);
      continue;
    }
    LeaseRec l;
    l.request = std::move(r->request);
    l.node = node;
    if (granted && in_group) {
      l.bundle = r->bundle;
      Subtract(pg->second.bundle_available[l.bundle], l.request.resources);
    } else if (granted) {
      Subtract(nodes_[node].available, l.request.resources);
    } else {
      pending_.push_back({PendingKind::kLease, l.request.lease_id, now});
    }
    leases_[l.request.lease_id] = std::move(l);
  }
  if (!nodes_.empty() || !actors_.empty() || !pgs_.empty() || !leases_.empty()) {
    LOG_INFO("recovered " + std::to_string(nodes_.size()) + " nodes, " +
             std::to_string(actors_.size()) + " actors, " + std::to_string(pgs_.size()) +
             " placement groups and " + std::to_string(leases_.size()) +
             " leases from the state store");
  }
}

void HeadService::Publish(const std::string& table, const std::string& id,
                          const std::string& state) {
  options_.store->Publish(
      records::Dump(nlohmann::json{{"table", table}, {"id", id}, {"state", state}}));
}

void HeadService::PersistNode(size_t i) {
  const auto& n = nodes_[i];
  NodeMemory& mem = node_memory_[n.id.Binary()];
  mem.written_used = mem.used;
  records::NodeRecord r{n.id,     node_addresses_[i], n.alive,   n.total,
                        n.labels, mem.used,           mem.total, mem.threshold};
  options_.store->Put("nodes", n.id.Hex(), records::NodeRecordJson(r));
  Publish("nodes", n.id.Hex(), n.alive ? "ALIVE" : "DEAD");
}

void HeadService::PersistActor(const ActorRec& a) {
  records::ActorRecord r;
  r.spec = a.spec;
  r.state = a.state;
  r.incarnation = a.incarnation;
  r.restarts_used = a.restarts_used;
  r.kill_requested = a.kill_requested;
  r.node_id = a.node >= 0 ? nodes_[a.node].id.Hex() : std::string();
  r.bundle = a.bundle;
  r.address = a.address;
  r.pid = a.pid;
  r.death_kind = a.death_kind;
  r.death_cause = a.death_cause;
  r.subscribers.assign(a.subscribers.begin(), a.subscribers.end());
  options_.store->Put("actors", Hex(a.spec.actor_id), records::ActorRecordJson(r));
  Publish("actors", Hex(a.spec.actor_id), records::ActorStateName(a.state));
}

void HeadService::PersistPg(const PgRec& pg) {
  records::PgRecord r;
  r.spec = pg.spec;
  r.state = records::PgRecord::State(int(pg.state));
  for (int n : pg.node_of_bundle)
    r.bundle_nodes.push_back(n >= 0 ? nodes_[n].id.Hex() : std::string());
  r.reason = pg.reason;
  static const char* kStates[] = {"PENDING", "CREATED", "REMOVED"};
  options_.store->Put("placement_groups", Hex(pg.spec.pg_id), records::PgRecordJson(r));
  Publish("placement_groups", Hex(pg.spec.pg_id), kStates[pg.state]);
}

void HeadService::PersistJob(const std::string& job_id) {
  const JobRec& j = jobs_[job_id];
  records::JobRecord r{j.info, j.alive, j.start_time, j.end_cause};
  r.info.job_id = job_id;
  options_.store->Put("jobs", Hex(job_id), records::JobRecordJson(r));
  Publish("jobs", Hex(job_id), j.alive ? "RUNNING" : "FINISHED");
}

void HeadService::PersistLease(const std::string& lease_id) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  const LeaseRec& l = it->second;
  records::LeaseRecord r{l.request, l.node >= 0 ? nodes_[l.node].id.Hex() : std::string(),
                         l.bundle};
  options_.store->Put("leases", Hex(lease_id), records::LeaseRecordJson(r));
}

void HeadService::ForgetLease(const std::string& lease_id) {
  options_.store->Delete("leases", Hex(lease_id));
}

}  // namespace orrery::scheduler
