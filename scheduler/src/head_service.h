// The head: node registry, resource view, actor directory and scheduling, named actors,
// leases for tasks, placement groups (DESIGN.md section 2). All state lives on the head's
// inbox thread; handlers never block. Every state change is written to the StateStore.
// Implemented in head_service.cc (dispatch, nodes, actors, leases, scheduling),
// head_jobs.cc (jobs, driver records, executables), head_placement_groups.cc and
// head_persistence.cc (records written and the rebuild on restart).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/src/protocol.h"
#include "core/src/state_store.h"
#include "core/src/transport.h"
#include "orrery/scheduler/policy.h"

namespace orrery::scheduler {

struct HeadOptions {
  std::string bind_host = "127.0.0.1";
  int port = 0;
  std::string advertise_host;
  std::shared_ptr<StateStore> store;
  long long max_message_bytes = 512ll << 20;
  // A node that has not been heard from for period x threshold is dead.
  double health_check_period_s = 1.0;
  int health_check_failure_threshold = 5;
  // Where drivers' executables are kept for nodes that lack them; empty: $ORRERY_TMPDIR
  // (or /tmp/orrery) + "/head_binaries".
  std::string binary_dir;
};

class HeadService {
 public:
  explicit HeadService(HeadOptions options);
  ~HeadService();
  Status Start();
  void Stop();
  const std::string& address() const { return inbox_.address(); }

 private:
  struct ActorRec {
    proto::ActorSpecMsg spec;
    proto::ActorState state = proto::ActorState::kPending;
    int incarnation = 0;
    int restarts_used = 0;
    bool kill_requested = false;
    int node = -1;  // index in nodes_, while placed
    int bundle = -1;
    std::string address;
    int pid = 0;
    std::string death_kind, death_cause;
    std::set<std::string> subscribers;
  };
  struct LeaseRec {
    proto::LeaseRequestMsg request;
    int node = -1;
    int bundle = -1;
  };
  struct PgWaiter {
    uint64_t request_id;
    std::string reply_to;
    double deadline;
  };
  struct PgRec {
    proto::PlacementGroupMsg spec;
    enum State { kPending, kCreated, kRemoved } state = kPending;
    std::vector<int> node_of_bundle;
    std::vector<Resources> bundle_available;
    std::vector<PgWaiter> waiters;
    std::string reason;
  };
  enum class PendingKind { kActor, kLease, kPg };
  struct Pending {
    PendingKind kind;
    std::string id;
    double since;
    std::string reason;  // why it waits, as last written to the "pending" table
  };

  // Rebuilds nodes, actors, named actors, placement groups, jobs and leases from the state
  // store, skipping (with a warning) every record that does not decode (head_persistence.cc).
  void Recover();
  // The index in nodes_ of the node with this hex id, or -1.
  int NodeIndex(const std::string& hex) const;
  void Handle(transport::Envelope& env);
  void OnRegisterNode(const transport::Envelope& env);
  void OnCreateActor(const transport::Envelope& env);
  void OnSubscribeActor(const transport::Envelope& env);
  void OnGetNamedActor(const transport::Envelope& env);
  void OnKillActor(const transport::Envelope& env);
  void OnRequestLease(const transport::Envelope& env);
  void OnReturnLease(const transport::Envelope& env);
  void OnCreatePg(const transport::Envelope& env);
  void OnWaitPg(const transport::Envelope& env);
  void OnRemovePg(const transport::Envelope& env);
  void OnClusterInfo(const transport::Envelope& env);
  void OnWorkerEvent(const transport::Envelope& env);
  void OnPing(const transport::Envelope& env);
  void OnRegisterJob(const transport::Envelope& env);
  void OnPutBinary(const transport::Envelope& env);
  void OnFetchBinary(const transport::Envelope& env);
  void OnPutRecord(const transport::Envelope& env);
  std::string BinaryPath(const std::string& hash) const;
  // Ok when `hash` and `argv` name the executable job `job_id` registered; the error (for
  // the requester) says what does not match. An executable that no job of this head
  // registered is never started (docs/design-decisions.md "Nodes run only registered
  // executables").
  Status CheckExecutable(const std::string& job_id, const std::vector<std::string>& argv,
                         const std::string& hash) const;
  // Whether some job registered the executable with this hash (what a node asks before it
  // runs one).
  bool VouchesFor(const std::string& hash) const;
  // Whether a node-scoped message (`what`) for node `node_id` carries that node's secret.
  // A registration (`adopt`) of a node whose secret this head does not know yet (a new node,
  // or one recovered from the store) sets it; anything else for such a node is dropped.
  bool FromNode(const std::string& node_id, const std::string& secret, const char* what,
                bool adopt);
  // The driver is gone: its non-detached actors and its leases go with it.
  void JobDied(const std::string& job_id, const std::string& cause);
  void PersistJob(const std::string& job_id);
  void Tick();
  void MarkNodeDead(size_t i, const std::string& cause);

  // Removes a demand from the queue (and its "pending" record).
  void ErasePending(PendingKind kind, const std::string& id);
  // Tries to place every pending demand, in arrival order.
  void ScheduleAll();
  // Returns true when the pending item is done (placed or failed).
  bool TryPlaceActor(ActorRec& a, const Pending& p, double now);
  bool TryPlaceLease(LeaseRec& l, const Pending& p, double now);
  bool TryPlacePg(PgRec& pg);
  // Chooses a node (or a bundle of placement group `pg_id`) for a demand and, when placed,
  // reserves the resources there. Otherwise sets wait_reason_.
  Decision PlaceAndReserve(const Resources& resources, const Labels& selector, int strategy,
                           const std::string& affinity_node, bool affinity_soft,
                           const std::string& pg_id, int bundle_index, int* bundle);
  // Places `demand` inside a placement group's bundles. Outcome as for nodes.
  Decision PlaceInBundle(PgRec& pg, int bundle_index, const Resources& demand, int* bundle_out);
  void Release(int node, const std::string& pg_id, int bundle, const Resources& demand);

  void ActorDied(ActorRec& a, const std::string& kind, const std::string& cause,
                 bool allow_restart);
  void Notify(const ActorRec& a);
  proto::ActorUpdateMsg UpdateOf(const ActorRec& a) const;
  ClusterView View() const;
  void PersistActor(const ActorRec& a);
  // Announces a state change on the events channel: {"table", "id", "state"}.
  void Publish(const std::string& table, const std::string& id, const std::string& state);
  void PersistNode(size_t i);
  void PersistPg(const PgRec& pg);
  // Writes lease `lease_id` (pending or granted) to the "leases" table; ForgetLease deletes it.
  void PersistLease(const std::string& lease_id);
  void ForgetLease(const std::string& lease_id);
  void ReplyAck(const std::string& to, uint64_t request_id, bool ok, const std::string& kind,
                const std::string& message);
  void ReplyPg(const std::string& to, uint64_t request_id, const PgRec* pg, bool ok,
               const std::string& kind, const std::string& message);

  HeadOptions options_;
  transport::Inbox inbox_;
  std::vector<NodeView> nodes_;
  std::vector<std::string> node_addresses_;
  std::vector<double> node_last_seen_;
  std::map<std::string, ActorRec> actors_;                            // by binary id
  std::map<std::pair<std::string, std::string>, std::string> named_;  // (ns, name) -> id
  std::map<std::string, LeaseRec> leases_;
  std::map<std::string, PgRec> pgs_;
  std::map<std::string, std::string> pg_names_;
  struct JobRec {
    proto::JobMsg info;
    bool alive = true;
    double last_seen = 0;
    double start_time = 0;
    std::string end_cause;
  };
  std::map<std::string, JobRec> jobs_;
  // Jobs told to upload their executable (NeedBinary): job id -> the hash it registered. A
  // PutBinary is stored only for such a job and that hash.
  std::map<std::string, std::string> awaiting_upload_;
  std::map<std::string, std::string> node_secrets_;  // binary node id -> its secret (FromNode)
  std::map<std::string, int64_t> stream_written_;    // record key -> last stream index appended
  // What each node's heartbeat last said of its memory (by binary node id), and what its
  // record in the store last said.
  struct NodeMemory {
    int64_t used = 0, total = 0;
    double threshold = 0;
    int64_t written_used = -1;
  };
  std::map<std::string, NodeMemory> node_memory_;
  std::deque<Pending> pending_;
  size_t round_robin_ = 0;
  std::string wait_reason_;  // set by TryPlace* when they return false
};

}  // namespace orrery::scheduler
