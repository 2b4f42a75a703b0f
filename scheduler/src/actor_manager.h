// The head's actor directory: every actor's spec, state and placement, named actors, the
// subscribers told of each state change, restarts and kills. Placement goes through the
// scheduling queue and the resource book. docs/architecture.md "The head".
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/src/head_context.h"
#include "scheduler/src/job_manager.h"
#include "scheduler/src/node_manager.h"
#include "scheduler/src/resource_book.h"
#include "scheduler/src/scheduling_queue.h"

namespace orrery::scheduler {

struct ActorEntry {
  proto::ActorSpecMsg spec;
  proto::ActorState state = proto::ActorState::kPending;
  int incarnation = 0;
  int restarts_used = 0;
  bool kill_requested = false;
  int node = -1;  // node index, while placed
  int bundle = -1;
  std::string address;
  // The worker's runtime inbox, where callers cancel calls (kCancel); not kept in the
  // record: after a head restart callers fall back to `address`.
  std::string control_address;
  int pid = 0;
  proto::ErrorKind death_kind = proto::ErrorKind::kNone;
  std::string death_cause;
  std::set<std::string> subscribers;
  double end_time = 0;  // when it died for good, seconds since the epoch (0: not DEAD)
};

class ActorManager final : public DemandSource {
 public:
  ActorManager(HeadContext ctx, NodeManager& nodes, ResourceBook& book, SchedulingQueue& queue,
               const JobManager& jobs)
      : ctx_(std::move(ctx)), nodes_(nodes), book_(book), queue_(queue), jobs_(jobs) {}

  void OnCreate(const proto::CreateActorMsg& m, double now);
  // A subscription to an actor not created yet waits up to kUnknownActorGraceS for its
  // creation: an owner's create and a borrower's subscribe (a task handed the new actor's
  // handle) travel on different connections, so the subscribe may come first.
  void OnSubscribe(const proto::SubscribeActorMsg& m, double now);
  // Answers "dead, unknown to the head" to the subscriptions that waited kUnknownActorGraceS.
  void Tick(double now);
  static constexpr double kUnknownActorGraceS = 2;
  // Beyond this many waiting subscriptions, a new one for an unknown actor is answered at once.
  static constexpr size_t kMaxWaitingSubscriptions = 10000;
  void OnGetNamed(const proto::NamedActorMsg& m) const;
  void OnKill(const proto::KillActorMsg& m);
  // A node's event for one of its actors (node: the sender's index, already authenticated).
  void OnWorkerEvent(const proto::WorkerEventMsg& m, int node, double now);
  // The actors on a dead node die (or restart elsewhere).
  void NodeDied(int node, const std::string& cause, double now);
  // A job ended: its actors that are not detached are killed, their names freed at once.
  void JobEnded(const std::string& job_id);
  // A placement group was removed: its actors are killed.
  void PlacementGroupRemoved(const std::string& pg_id);

  bool TryPlace(const std::string& id, double since, double now, std::string* reason) override;
  std::string Describe(const std::string& id) const override;

  const ActorEntry* Find(const std::string& actor_id) const;
  // Drops a DEAD actor (by hex id) whose record expired (docs/redis-schema.md "Retention");
  // false, keeping it, when the actor is not dead.
  bool Forget(const std::string& actor_hex);
  // Whether job `job_id` (binary) still has actors that are not dead: detached actors outlive
  // their job, and their restarts need its record.
  bool HasLiveActors(const std::string& job_id) const { return of_job_.count(job_id) > 0; }
  size_t size() const { return actors_.size(); }
  // Every actor by binary id (the head's metrics count them by state).
  const std::map<std::string, ActorEntry>& all() const { return actors_; }
  // Rebuilds the directory from the "actors" table (after nodes, groups and jobs).
  void Restore(const TableRecords& records, double now);

 private:
  // OnKill's work, before its acknowledgement.
  void Kill(const proto::KillActorMsg& m);
  Status Validate(const proto::CreateActorMsg& m) const;
  // Kills the actor's worker through its node (the actor must be placed).
  void KillOnNode(const ActorEntry& a, const std::string& reason);
  void Died(ActorEntry& a, proto::ErrorKind kind, const std::string& cause, bool allow_restart,
            double now);
  void FreeName(const ActorEntry& a);
  void Notify(const ActorEntry& a) const;
  proto::ActorUpdateMsg UpdateOf(const ActorEntry& a) const;
  void Persist(const ActorEntry& a);
  // Takes a record read back from the store into the directory.
  void Adopt(ActorEntry a, double now);
  // Keeps the indexes by node, job and group as an actor is placed, unplaced or dies.
  void SetNode(ActorEntry& a, int node);
  void Index(const ActorEntry& a);
  void Unindex(const ActorEntry& a);
  // The ids of the live actors in index `index` under `key` (a copy: callers change them).
  template <typename Key>
  static std::vector<std::string> Members(const std::map<Key, std::set<std::string>>& index,
                                          const Key& key);

  HeadContext ctx_;
  NodeManager& nodes_;
  ResourceBook& book_;
  SchedulingQueue& queue_;
  const JobManager& jobs_;
  std::map<std::string, ActorEntry> actors_;                          // by binary id
  std::map<std::pair<std::string, std::string>, std::string> named_;  // (ns, name) -> id
  // Live actors by node index, by job and by placement group: what a node's death, a job's
  // end or a group's removal touches, without a walk over every actor.
  std::map<int, std::set<std::string>> on_node_;
  std::map<std::string, std::set<std::string>> of_job_, in_group_;
  // Subscriptions to actors not known yet: actor id -> (subscriber, since when).
  std::map<std::string, std::vector<std::pair<std::string, double>>> waiting_;
  size_t waiting_count_ = 0;
};

}  // namespace orrery::scheduler
