// The head's service: what drivers and workers ask of it (actors, named actors, leases,
// placement groups, cluster info, jobs, executables, driver records) and its replies
// (docs/protocol.md). Ids travel as 16-byte binary strings.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/internal/protocol_autoscaler.h"
#include "core/internal/protocol_objects.h"
#include "core/internal/protocol_wire.h"

namespace orrery::proto {

// A worker's runtime environment (orrery::RuntimeEnv): checked by the submitter and again by
// the node (RuntimeEnvProblem in node/src/worker_spawn.cc).
struct RuntimeEnvMsg {
  std::map<std::string, std::string> env_vars;
  std::string working_dir;  // absolute, on the submitting host; empty: the node's own
  // Set by a submitter in a cluster (older ones omit them): the SHA-256 of working_dir's
  // package, which the head keeps, and the folder's identity on the submitting host
  // (folder_pack::FolderIdentity). A node that sees that very folder starts the worker in
  // it; any other runs it in its unpacked copy of the package.
  std::string working_dir_hash;
  std::string working_dir_id;
  bool empty() const { return env_vars.empty() && working_dir.empty(); }
  bool operator==(const RuntimeEnvMsg& o) const {
    return env_vars == o.env_vars && working_dir == o.working_dir &&
           working_dir_hash == o.working_dir_hash && working_dir_id == o.working_dir_id;
  }
  MSGPACK_DEFINE(env_vars, working_dir, working_dir_hash, working_dir_id);
};

// An async actor's calls in flight when its creator did not set max_concurrency (as Ray's
// async actors).
inline constexpr int kDefaultAsyncCalls = 1000;

struct ActorOptionsMsg {
  std::map<std::string, double> resources;
  std::map<std::string, std::string> label_selector;
  std::string name;
  std::string namespace_;
  int max_restarts = 0;
  int max_task_retries = 0;
  int max_concurrency = 1;
  int lifetime = 0;
  std::string placement_group;
  int bundle_index = -1;
  int strategy = 0;  // 0 default, 1 spread, 2 node affinity
  std::string affinity_node;
  bool affinity_soft = false;
  RuntimeEnvMsg runtime_env;  // older senders omit it (none)
  // How many async calls (methods returning orrery::Async) may be in flight, suspended or
  // not: max_concurrency when the creator set it, else kDefaultAsyncCalls; 0 (older senders):
  // the default.
  int max_async_calls = 0;
  MSGPACK_DEFINE(resources, label_selector, name, namespace_, max_restarts, max_task_retries,
                 max_concurrency, lifetime, placement_group, bundle_index, strategy, affinity_node,
                 affinity_soft, runtime_env, max_async_calls);
};

struct ActorSpecMsg {
  std::string actor_id;
  std::string job_id;
  std::string factory;
  std::string args;   // msgpack array
  std::string owner;  // owner's inbox address
  ActorOptionsMsg options;
  double infeasible_timeout_s = 5;
  std::vector<std::string> argv;  // the driver's command line; argv[0] is its executable
  std::string binary_hash;        // content of argv[0]; empty: use the path as it is
  std::string arch;               // the architecture it was built for
  MSGPACK_DEFINE(actor_id, job_id, factory, args, owner, options, infeasible_timeout_s, argv,
                 binary_hash, arch);
};

struct CreateActorMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  ActorSpecMsg spec;
  MSGPACK_DEFINE(request_id, reply_to, spec);
};

enum class ActorState : int { kPending = 0, kAlive = 1, kRestarting = 2, kDead = 3 };

struct ActorUpdateMsg {
  std::string actor_id;
  int state = 0;  // ActorState
  std::string address;
  int incarnation = 0;
  ErrorKind death_kind = ErrorKind::kNone;  // for callers: kActorDiedError, kInfeasibleError, ...
  std::string death_cause;
  std::string node_id;
  int pid = 0;
  std::string control_address;  // the actor worker's runtime inbox (kCancel); appended last
  MSGPACK_DEFINE(actor_id, state, address, incarnation, death_kind, death_cause, node_id, pid,
                 control_address);
};

struct SubscribeActorMsg {
  std::string actor_id;
  std::string reply_to;
  MSGPACK_DEFINE(actor_id, reply_to);
};

struct NamedActorMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  std::string name;
  std::string namespace_;
  std::string actor_id;  // reply: empty when not found
  MSGPACK_DEFINE(request_id, reply_to, name, namespace_, actor_id);
};

struct KillActorMsg {
  std::string actor_id;
  bool no_restart = true;
  uint64_t request_id = 0;  // appended last: answered with kAck when reply_to is set
  std::string reply_to;
  MSGPACK_DEFINE(actor_id, no_restart, request_id, reply_to);
};

struct LeaseRequestMsg {
  uint64_t request_id = 0;
  std::string lease_id;
  std::string reply_to;
  std::map<std::string, double> resources;
  std::map<std::string, std::string> label_selector;
  std::string placement_group;
  int bundle_index = -1;
  double infeasible_timeout_s = 5;
  std::string job_id;
  std::vector<std::string> argv;  // the driver's command line; argv[0] is its executable
  int strategy = 0;
  std::string affinity_node;
  bool affinity_soft = false;
  std::string binary_hash;
  std::string arch;
  // The retries of the tasks this lease runs (-1: forever): a node's memory monitor kills
  // workers whose tasks are retried first. Older senders omit it (0: not retried).
  int max_retries = 0;
  RuntimeEnvMsg runtime_env;  // older senders omit it (none)
  MSGPACK_DEFINE(request_id, lease_id, reply_to, resources, label_selector, placement_group,
                 bundle_index, infeasible_timeout_s, job_id, argv, strategy, affinity_node,
                 affinity_soft, binary_hash, arch, max_retries, runtime_env);
};

struct LeaseReplyMsg {
  uint64_t request_id = 0;
  std::string lease_id;
  bool ok = true;
  ErrorKind error_kind = ErrorKind::kNone;
  std::string message;
  std::string worker_address;
  std::string worker_id;
  std::string node_id;
  std::string control_address;  // the worker's runtime inbox (kCancel); appended last
  MSGPACK_DEFINE(request_id, lease_id, ok, error_kind, message, worker_address, worker_id, node_id,
                 control_address);
};

struct ReturnLeaseMsg {
  std::string lease_id;
  bool worker_failed = false;
  uint64_t request_id = 0;  // appended last: answered with kAck when reply_to is set
  std::string reply_to;
  MSGPACK_DEFINE(lease_id, worker_failed, request_id, reply_to);
};

struct PlacementGroupMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  std::string pg_id;
  std::string name;
  std::vector<std::map<std::string, double>> bundles;
  int strategy = 0;
  std::string same_label;
  std::map<std::string, std::string> label_selector;
  double timeout_s = 0;  // kWaitPlacementGroup
  MSGPACK_DEFINE(request_id, reply_to, pg_id, name, bundles, strategy, same_label, label_selector,
                 timeout_s);
};

struct PlacementGroupReplyMsg {
  uint64_t request_id = 0;
  bool ok = true;
  ErrorKind error_kind = ErrorKind::kNone;
  std::string message;
  bool ready = false;
  std::string pg_id;
  std::vector<std::map<std::string, double>> bundles;
  int strategy = 0;
  std::string name;
  MSGPACK_DEFINE(request_id, ok, error_kind, message, ready, pg_id, bundles, strategy, name);
};

struct NodeInfoMsg {
  std::string node_id;
  std::string address;
  bool alive = true;
  std::map<std::string, double> total;
  std::map<std::string, double> available;
  std::map<std::string, std::string> labels;
  // The node's memory monitor: memory in use and the limit that applies (host or cgroup),
  // in bytes, and the fraction above which it kills workers. 0 from older senders or when
  // the node cannot read its memory.
  int64_t memory_used_bytes = 0;
  int64_t memory_total_bytes = 0;
  double memory_usage_threshold = 0;
  // The node's shared-memory object store (docs/objects.md): its usage, and the arena a
  // driver on the same host maps (the tag proves a file is that node's arena).
  ObjectStoreUsageMsg object_store;
  std::string object_store_path;
  std::string object_store_tag;
  // Where the node serves Prometheus metrics ("host:port", empty: not served); appended last.
  std::string metrics_address;
  // Alive but silent past the head's suspicion threshold (no new work goes there); appended.
  bool suspected = false;
  MSGPACK_DEFINE(node_id, address, alive, total, available, labels, memory_used_bytes,
                 memory_total_bytes, memory_usage_threshold, object_store, object_store_path,
                 object_store_tag, metrics_address, suspected);
};

struct ClusterInfoMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  std::vector<NodeInfoMsg> nodes;
  // The node groups of a running `orrery autoscaler` (docs/autoscaler.md): nodes that may
  // still come, for the trainer's feasibility check. Empty without one.
  std::vector<AutoscalerGroupMsg> autoscaler_groups;
  MSGPACK_DEFINE(request_id, reply_to, nodes, autoscaler_groups);
};

struct JobMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  std::string job_id;
  std::string driver_address;
  int pid = 0;
  std::string namespace_;
  std::string entrypoint;
  bool alive = true;
  std::string binary_hash;  // cluster mode: the head asks for the binary when it lacks it
  std::string arch;
  // Appended last: tasks and actor calls the driver submitted so far (heartbeats carry it),
  // and the submission (`orrery job submit`) that started this driver, if one did.
  uint64_t tasks_submitted = 0;
  std::string submission_id;
  MSGPACK_DEFINE(request_id, reply_to, job_id, driver_address, pid, namespace_, entrypoint, alive,
                 binary_hash, arch, tasks_submitted, submission_id);
};

// A record a driver asks the head to keep in the state store: the training module's run
// records (table "train_runs") and, when stream_index >= 0, one entry of the run's metrics
// stream. Resends are harmless: the head appends a stream entry once per index.
struct RecordMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  std::string table;
  std::string key;
  std::string json;  // the record; empty: keep the current one
  int64_t stream_index = -1;
  std::string stream_json;  // the stream entry's fields, a JSON object of strings
  MSGPACK_DEFINE(request_id, reply_to, table, key, json, stream_index, stream_json);
};

// An executable named by its SHA-256 (64 lowercase hex). PutBinary: a driver uploads the
// executable its job registered (job_id). FetchBinary: a node asks whether the head vouches
// for `hash` (a job registered it) and, with want_bytes, for its content; the reply echoes
// the node's request_id, an unguessable nonce, so that no other peer can answer for the head.
struct BinaryMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  std::string hash;
  std::string arch;
  bool ok = true;
  std::string message;
  std::string job_id;
  bool want_bytes = true;
  // A working_dir's package (folder_pack.h), not an executable: stored for any peer, served
  // to any node, never run.
  bool package = false;
  MSGPACK_DEFINE(request_id, reply_to, hash, arch, ok, message, job_id, want_bytes, package);
};

}  // namespace orrery::proto
