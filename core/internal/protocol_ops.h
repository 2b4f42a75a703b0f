// Operating a cluster (docs/protocol.md "Jobs, logs and listings"): jobs submitted with
// `orrery job submit` (CLI -> head -> node), worker and job output on its way to the
// drivers and to `orrery logs` (node -> head -> driver), and the listing of a node's
// workers (CLI -> node) and of a driver's tasks (CLI -> driver).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/internal/protocol_head.h"
#include "core/internal/protocol_wire.h"

namespace orrery::proto {

// CLI -> head (kSubmitJob), answered kSubmitJobReply. The executable travels by hash: a head
// that lacks it answers need_binary, the CLI sends it (kPutBinary with job_id =
// submission_id) and submits again with the same submission_id.
struct SubmitJobMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  std::string submission_id;      // chosen by the CLI ("job_" + 16 hex)
  std::vector<std::string> argv;  // argv[0]: the executable's file name, as the user gave it
  std::string binary_hash;        // SHA-256 of the executable
  std::string arch;
  std::map<std::string, double> resources;            // what the node must have free
  std::map<std::string, std::string> label_selector;  // label=value the node must carry
  std::string entrypoint;                             // the command line, for people
  // The driver's variables and working folder (--env, --working-dir); older CLIs omit it.
  RuntimeEnvMsg runtime_env;
  MSGPACK_DEFINE(request_id, reply_to, submission_id, argv, binary_hash, arch, resources,
                 label_selector, entrypoint, runtime_env);
};

struct SubmitJobReplyMsg {
  uint64_t request_id = 0;
  std::string submission_id;
  bool need_binary = false;
  std::string error;          // empty: accepted
  bool need_package = false;  // upload the working_dir's package (runtime_env.working_dir_hash)
  MSGPACK_DEFINE(request_id, submission_id, need_binary, error, need_package);
};

// Head -> node (kStartJob): run a submitted job's driver. env holds ORRERY_ADDRESS and
// ORRERY_SUBMISSION_ID; the node adds nothing else but its own environment.
struct StartJobMsg {
  std::string submission_id;
  std::vector<std::string> argv;
  std::string binary_hash;
  std::string arch;
  std::map<std::string, std::string> env;
  std::string working_dir;  // the submission's (absolute); empty: the node's folder for it
  // As RuntimeEnvMsg's: the package of working_dir and its identity on the submitting host
  // (empty from older heads: working_dir is used in place).
  std::string working_dir_hash;
  std::string working_dir_id;
  MSGPACK_DEFINE(submission_id, argv, binary_hash, arch, env, working_dir, working_dir_hash,
                 working_dir_id);
};

enum class JobEventKind : int { kStarted = 0, kExited = 1, kFailedToStart = 2 };

// Node -> head (kJobEvent): a submitted job's driver started or ended.
struct JobEventMsg {
  int kind = 0;
  std::string submission_id;
  std::string node_id;
  std::string node_secret;
  int pid = 0;
  int exit_code = 0;  // kExited: the exit status, or 128 + the signal that killed it
  std::string cause;  // how it ended or why it could not start, for people
  // The head acknowledges the event (kAck to reply_to, this request_id) once stored; the
  // node sends it again until then (node/src/head_events.h).
  uint64_t request_id = 0;
  std::string reply_to;
  MSGPACK_DEFINE(kind, submission_id, node_id, node_secret, pid, exit_code, cause, request_id,
                 reply_to);
};

// CLI -> head (kStopJob, answered kAck) and head -> node (kStopJob): stop a submitted job.
struct StopJobMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  std::string submission_id;
  MSGPACK_DEFINE(request_id, reply_to, submission_id);
};

// Lines one process wrote to stdout or stderr.
struct LogLinesMsg {
  std::string job_id;         // hex; the job the process works for ("" when unknown)
  std::string submission_id;  // a submitted job's driver: its submission id
  std::string actor_id;       // hex; an actor's worker
  std::string name;           // the actor's class, "task" for a task worker, "driver"
  int pid = 0;
  bool is_stderr = false;
  std::vector<std::string> lines;
  MSGPACK_DEFINE(job_id, submission_id, actor_id, name, pid, is_stderr, lines);
};

// Node -> head and head -> driver (kLogBatch): output of the node's workers and jobs.
struct LogBatchMsg {
  std::string node_id;      // hex
  std::string node_secret;  // node -> head only
  std::vector<LogLinesMsg> groups;
  MSGPACK_DEFINE(node_id, node_secret, groups);
};

// CLI -> node (kListWorkers), answered kListWorkersReply.
struct ListWorkersMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  MSGPACK_DEFINE(request_id, reply_to);
};

struct WorkerInfoMsg {
  int pid = 0;
  std::string kind;  // "actor", "task", "job"
  std::string state;
  std::string job_id;
  std::string actor_id;
  std::string lease_id;
  std::string name;
  double start_time = 0;  // seconds since the epoch
  std::map<std::string, double> resources;
  MSGPACK_DEFINE(pid, kind, state, job_id, actor_id, lease_id, name, start_time, resources);
};

inline constexpr size_t kMaxListedWorkers = 10000;

struct ListWorkersReplyMsg {
  uint64_t request_id = 0;
  std::string node_id;
  std::vector<WorkerInfoMsg> workers;
  bool truncated = false;
  MSGPACK_DEFINE(request_id, node_id, workers, truncated);
};

// CLI -> a driver's runtime (kListTasks), answered kListTasksReply: the tasks and actor
// calls that process submitted, newest last (`orrery list tasks`).
struct ListTasksMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  MSGPACK_DEFINE(request_id, reply_to);
};

struct TaskInfoMsg {
  std::string task_id;                   // hex: the id of its result
  std::string name;                      // the function or method
  std::string kind;                      // "task" or "actor_call"
  std::string actor_id;                  // hex, for an actor call
  std::string state;                     // PENDING, FINISHED, FAILED, CANCELLED
  std::string error;                     // the error kind's name when FAILED
  double submit_time = 0, end_time = 0;  // seconds since the epoch
  MSGPACK_DEFINE(task_id, name, kind, actor_id, state, error, submit_time, end_time);
};

inline constexpr size_t kMaxListedTasks = 10000;

struct ListTasksReplyMsg {
  uint64_t request_id = 0;
  std::string job_id;  // hex
  std::vector<TaskInfoMsg> tasks;
  bool truncated = false;  // more were submitted than the process keeps
  MSGPACK_DEFINE(request_id, job_id, tasks, truncated);
};

}  // namespace orrery::proto
