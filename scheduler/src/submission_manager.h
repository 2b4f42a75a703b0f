// The head's submitted jobs (docs/jobs.md): `orrery job submit` asks the head to run a
// driver executable on a node of the cluster. The head keeps the executable (by SHA-256, as
// for drivers' own registrations), picks a node (the head's own host by default, else one
// with the resources and labels asked for), tells it to start the driver, and records the
// job's state (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED) in the "submissions" table.
// Also routes the log lines nodes send (docs/logs.md): into the state store's log streams
// and on to the drivers of the jobs they belong to.
#pragma once

#include <map>
#include <string>

#include "scheduler/src/head_context.h"
#include "scheduler/src/job_manager.h"
#include "scheduler/src/node_manager.h"

namespace orrery::scheduler {

enum class SubmissionState { kPending, kRunning, kSucceeded, kFailed, kStopped };
const char* SubmissionStateName(SubmissionState s);
// Ok when a submission is well formed (its id, command line, hash, resources, labels).
Status CheckSubmission(const proto::SubmitJobMsg& m);

struct Submission {
  proto::SubmitJobMsg spec;  // reply_to and request_id are not kept
  SubmissionState state = SubmissionState::kPending;
  int node = -1;  // the node it runs on (an index of the NodeManager), -1 while pending
  int pid = 0;
  int exit_code = 0;
  bool has_exit_code = false;
  bool stop_requested = false;
  bool reserved = false;                                 // spec.resources are taken from the node's
  double submit_time = 0, start_time = 0, end_time = 0;  // wall clock
  std::string message;
  std::string job_id;     // hex, once its driver registered
  double start_sent = 0;  // wall clock: when kStartJob last went to its node (0: never here)
};

class SubmissionManager {
 public:
  // Submissions kept in memory at most; beyond it, the oldest ended ones are dropped.
  static constexpr size_t kMaxSubmissions = 10000;
  // The most text one log stream entry holds.
  static constexpr size_t kMaxLogEntryBytes = 16 << 10;
  // A job sent to its node but not reported started is sent again this often (the node
  // ignores a start for a job it runs or ran): a kStartJob sent as the head stops dies with
  // it, and the restarted head sends it again on its first tick.
  static constexpr double kStartResendS = 2;

  SubmissionManager(HeadContext ctx, NodeManager& nodes, JobManager& jobs)
      : ctx_(std::move(ctx)), nodes_(nodes), jobs_(jobs) {}
  // The head's own address ("tcp://host:port"): given to drivers, and its host picks the
  // default node.
  void SetHeadAddress(std::string address) { head_address_ = std::move(address); }

  void OnSubmit(const proto::SubmitJobMsg& m, double wall_now);
  void OnStop(const proto::StopJobMsg& m, double wall_now);
  // A node's report (its secret already checked by the caller): started, exited, failed.
  void OnJobEvent(const proto::JobEventMsg& m, int node, double wall_now);
  // Starts pending submissions that now fit somewhere, and sends again the kStartJob of
  // those their node has not reported started for kStartResendS.
  void Tick(double wall_now);
  // Node `i` died: what ran there FAILED.
  void NodeDied(int i, const std::string& cause, double wall_now);
  // A registering driver named its submission: the record learns its job id.
  void DriverRegistered(const std::string& submission_id, const std::string& job_id_hex);
  // Log lines from node `node` (its secret checked): stored and passed on to drivers.
  void OnLogBatch(proto::LogBatchMsg m, int node);
  void Restore(const TableRecords& records, double wall_now);
  // Retention (retention.h): drops an ended submission; false for one still running.
  bool Forget(const std::string& submission_id);

 private:
  // The node to run `s` on, -1 when none fits now.
  int PickNode(const Submission& s) const;
  void Start(Submission& s, int node, double wall_now);
  // Sends kStartJob for `s` to its node.
  void SendStart(Submission& s, double wall_now);
  void End(Submission& s, SubmissionState state, const std::string& message, double wall_now);
  void Persist(const Submission& s);
  void Evict();
  void StoreLogs(const proto::LogLinesMsg& g, const std::string& node_hex);
  std::string Json(const Submission& s) const;

  HeadContext ctx_;
  NodeManager& nodes_;
  JobManager& jobs_;
  std::string head_address_;
  std::map<std::string, Submission> subs_;  // by submission id
  int64_t log_seq_ = 0;  // the last log stream entry's number (milliseconds * 1000 + n)
};

}  // namespace orrery::scheduler
