// Worker <-> node: a new worker registers with its node, which assigns it an actor or a
// task lease, and tells it to exit; the worker reports its call counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/internal/protocol_node.h"

namespace orrery::proto {

struct WorkerRegisterMsg {
  std::string worker_id;
  std::string address;  // the worker's runtime inbox (control, replies, objects)
  int pid = 0;
  std::string call_address;  // where callers send kCall
  MSGPACK_DEFINE(worker_id, address, pid, call_address);
};

struct AssignMsg {
  std::string worker_id;
  bool is_actor = false;
  StartActorMsg actor;
  std::string node_id;
  std::string head_address;
  MSGPACK_DEFINE(worker_id, is_actor, actor, node_id, head_address);
};

struct AssignReplyMsg {
  std::string worker_id;
  std::string actor_id;
  bool ok = true;
  ErrorKind error_kind = ErrorKind::kNone;
  std::string error_type;
  std::string message;
  MSGPACK_DEFINE(worker_id, actor_id, ok, error_kind, error_type, message);
};

// Worker -> node (kWorkerStats), about once a second while anything changed: the worker's
// counts since it started (cumulative, so a lost message loses nothing). The node sums its
// workers' counts into its metrics (docs/metrics.md).
inline constexpr size_t kCallLatencyBuckets = 16;  // upper bounds: 1 ms * 2^i, then +Inf

struct WorkerStatsMsg {
  std::string worker_id;
  int pid = 0;
  uint64_t submitted = 0;  // tasks and actor calls this worker submitted itself
  uint64_t started = 0;    // calls it began to run
  uint64_t finished = 0;   // calls that returned a value
  uint64_t failed = 0;     // calls that threw or were cancelled
  // Run time of the calls that ended, per bucket (not cumulative across buckets; the last
  // one is +Inf), and their sum in seconds.
  std::vector<uint64_t> latency_buckets;
  double latency_sum_s = 0;
  MSGPACK_DEFINE(worker_id, pid, submitted, started, finished, failed, latency_buckets,
                 latency_sum_s);
};

}  // namespace orrery::proto
