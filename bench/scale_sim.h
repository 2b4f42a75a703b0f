// Simulated nodes and a simulated driver for orrery_scale_bench (docs/benchmarks.md "Head at
// scale"): they speak the head's real protocol (core/internal/protocol.h) over the real transport,
// from this one process, with no worker processes.
//
// N nodes share a few inboxes (SimOptions::inboxes), so that neither this process nor the
// head holds a socket per node: a node's registered address is its group's inbox. Every
// node has its own id and secret (docs/protocol.md "Node-scoped messages"); one thread sends
// every node's heartbeat (a RegisterNodeMsg with alive = true, the first of which registers
// it) once per period, spread evenly over the period. A StartActor does not name its node,
// so the driver learns where an actor was placed from the head (SubscribeActor) before it
// answers, from that node, with the WorkerEvent kActorAlive.
//
// Threads: the heartbeat thread, one thread per inbox, and the caller's (the driver's
// requests). The counters and replies below are guarded by mu_; every wait has a deadline.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/internal/protocol.h"
#include "core/internal/transport.h"

namespace orrery::bench {

struct SimOptions {
  std::string head_address;  // tcp://host:port
  int nodes = 100;
  int inboxes = 4;  // the nodes' shared inboxes
  double heartbeat_s = 1.0;
  double node_cpus = 64;  // each node's "CPU"; an actor asks for 1
};

class SimCluster {
 public:
  explicit SimCluster(SimOptions options);
  ~SimCluster();
  SimCluster(const SimCluster&) = delete;
  SimCluster& operator=(const SimCluster&) = delete;

  // Binds the inboxes and starts the heartbeats (which register the nodes).
  Status Start();
  // Stops the heartbeats (the nodes fall silent) and the inboxes. Idempotent.
  void Stop();

  // The nodes the head reports alive (GetClusterInfo), or -1 when it did not answer within
  // `timeout_s`.
  int AliveNodes(double timeout_s);
  // Polls AliveNodes until every simulated node is alive; false at the deadline.
  bool WaitAllAlive(double timeout_s);

  struct Placement {
    int requested = 0;
    int acked = 0;       // CreateActor acknowledged ok
    int placed = 0;      // StartActor received by a simulated node
    double seconds = 0;  // first CreateActor sent to the last StartActor received
  };
  // Creates `count` actors (each asking for one CPU; the first is named `name` in namespace
  // "bench" and detached), keeping at most `window` created and not yet placed.
  Placement PlaceActors(int count, int window, const std::string& name, double timeout_s);
  // Answers every placed actor with kActorAlive from its node; returns how many the head
  // announced alive before the deadline.
  int MakeAlive(int window, double timeout_s);

  struct PgCycles {
    int done = 0;
    int failed = 0;
    double seconds = 0;
  };
  // Creates a one-bundle placement group, waits until it is placed, removes it; again, for
  // `seconds` (at least once). A cycle that errs or times out counts as failed and ends it.
  PgCycles CreateRemovePgs(double seconds, double timeout_s);

  struct LeaseCycles {
    int granted = 0;
    double seconds = 0;
  };
  // Requests `count` leases (one CPU each), at most `window` outstanding, returning each as
  // soon as a node is granted it.
  LeaseCycles GrantLeases(int count, int window, double timeout_s);

  // One Ping round trip: the seconds until the head answered (what is queued before it
  // included), or -1 when it did not within `timeout_s`.
  double PingSeconds(double timeout_s);

  // One GetNamedActor round trip: the actor id the head answered ("" for none), or nullopt
  // when no answer came within `timeout_s`.
  std::optional<std::string> LookupNamed(const std::string& name, double timeout_s);
  // The id of the actor created under `name` by PlaceActors.
  const std::string& named_actor_id() const { return named_actor_id_; }

  // Heartbeat acks refused by the head (a node it does not accept), over the whole run.
  int64_t refused_acks() const;

 private:
  struct Node {
    std::string id;      // binary
    std::string secret;  // sent with every node-scoped message
    std::string frame;   // its heartbeat, encoded once
  };
  struct Reply {
    proto::MsgType type;
    std::string meta;
  };

  void HeartbeatLoop();
  void OnNodeMessage(transport::Envelope& env);
  void OnDriverMessage(transport::Envelope& env);
  void OnActorUpdate(const proto::ActorUpdateMsg& u);
  uint64_t NextRequest() { return next_request_++; }
  // Waits for the reply to `request_id` (and takes it) until `timeout_s` passes.
  std::optional<Reply> TakeReply(uint64_t request_id, double timeout_s);
  template <typename Pred>
  bool WaitUntil(std::unique_lock<std::mutex>& lock, double deadline_s, Pred pred);

  SimOptions options_;
  std::vector<std::unique_ptr<transport::Inbox>> node_inboxes_;
  transport::Inbox driver_inbox_;
  std::vector<Node> nodes_;
  std::unordered_map<std::string, size_t> node_index_;  // binary id -> nodes_; fixed after ctor
  std::thread heartbeats_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> next_request_;
  std::string named_actor_id_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Reply> replies_;
  std::vector<std::string> placed_;           // actor ids in StartActor order
  std::set<std::string> alive_sent_, alive_;  // kActorAlive sent / announced by the head
  std::set<std::string> granted_;             // lease ids granted to a simulated node
  int64_t acks_refused_ = 0;
  int64_t create_acks_ok_ = 0;
  bool started_ = false;
};

}  // namespace orrery::bench
