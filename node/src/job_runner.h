// Submitted jobs on the node (docs/jobs.md): the drivers that `orrery job submit` asked the
// head to run here, started from the executable the head vouched for (checked by SHA-256,
// fetched through the ExecutableCache when this host lacks it), watched until they exit, and
// stopped on request (SIGTERM to the driver's process group, SIGKILL after a grace period).
// Every start, refusal and exit is reported to the head (kJobEvent) through the Outbox, and
// sent again until the head acknowledges it (head_events.h): a job that exits while the head
// is down is reported to the restarted head.
//
// Not thread-safe: used on the node's inbox thread only.
#pragma once

#include <map>
#include <string>

#include "core/internal/outbox.h"
#include "core/internal/protocol.h"
#include "core/internal/recent_ids.h"
#include "node/src/executable_cache.h"
#include "node/src/head_events.h"
#include "node/src/log_monitor.h"
#include "node/src/process_cgroup.h"

namespace orrery::node {

// Who this node is, for the jobs' events and files.
struct JobRunnerOptions {
  std::string head_address;
  std::string node_id;                     // binary
  std::string node_name;                   // hex prefix, in messages
  std::string node_secret;                 // RegisterNodeMsg::node_secret
  std::string log_dir;                     // drivers' stdout/stderr go to job-<id>.out/.err there
  std::map<std::string, std::string> env;  // added to every driver's environment
};

class JobRunner {
 public:
  // Marks a job among the waiters of ExecutableCache::Await.
  static constexpr const char* kWaiter = "job:";

  JobRunner(JobRunnerOptions options, Outbox& outbox, ExecutableCache& executables);
  ~JobRunner() { StopAll(); }
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Where the drivers' log files are tailed from, and the node's inbox, where the head
  // acknowledges the jobs' events; neither before the node starts.
  void SetNode(const std::string& address, LogMonitor* logs) {
    events_.SetReplyTo(address);
    logs_ = logs;
  }
  // The head's kAck for request `request_id`: true when it was a job event's (it is done).
  bool OnEventAck(uint64_t request_id) { return events_.OnAck(request_id); }
  // Sends again the events the head has not acknowledged for HeadEvents::kResendS.
  void ResendEvents(double now) { events_.Resend(now); }
  // Where each driver gets a cgroup of its own (job-<submission id>), killed with everything
  // in it when the driver exits or is stopped; null: none (only the driver's process group
  // is signalled then).
  void SetCgroups(CgroupTree* cgroups) { cgroups_ = cgroups; }

  // kStartJob: starts the driver, or asks the head for its executable (answering to
  // `reply_to`, the node's inbox) first; a request it cannot run is reported to the head as
  // kFailedToStart. A resend of a job that runs, or of one of the last kEndedKept that
  // ended here, is ignored (the head sends a start again until it hears the job started).
  void OnStart(const proto::StartJobMsg& m, const std::string& reply_to);
  void OnStop(const proto::StopJobMsg& m);
  // The executable or working_dir package with this hash was fetched (error empty) or could
  // not be: go on starting the job, or report that it failed to start.
  void OnExecutable(const std::string& submission_id, const std::string& hash, bool package,
                    const std::string& error);
  // On every tick: reaps ended drivers and reports them; kills those that ignored a stop for
  // too long.
  void Check();
  // Kills every driver (the node stops).
  void StopAll();
  // `orrery list workers`: appends the drivers to the reply.
  void List(proto::ListWorkersReplyMsg* reply) const;
  // Whether a driver of this node starts or runs in `folder`.
  bool UsesFolder(const std::string& folder) const {
    for (const auto& [id, j] : jobs_)
      if (j.working_dir == folder) return true;
    return false;
  }

 private:
  struct JobProcess {
    proto::StartJobMsg start;
    int pid = 0;
    bool stop_requested = false;
    double stop_since = 0;
    double wall_started = 0;
    std::string reply_to;     // the node's inbox, for the head's answers to fetches
    std::string working_dir;  // where it starts: working_dir itself or the package's copy
  };

  // Fetches what the job lacks on this host (its working_dir's package, then its
  // executable), one at a time, and launches it once nothing is missing.
  void Prepare(JobProcess& j);

  // Starts the job's driver from the executable at `path`.
  void Launch(JobProcess& j, const std::string& path);
  // Kills the driver's process group and, where it has one, its cgroup.
  void KillAll(const std::string& submission_id, int pid);
  void SendEvent(const std::string& submission_id, proto::JobEventKind kind, int pid, int exit_code,
                 const std::string& cause);

  JobRunnerOptions options_;
  Outbox& outbox_;
  ExecutableCache& executables_;
  LogMonitor* logs_ = nullptr;
  CgroupTree* cgroups_ = nullptr;
  HeadEvents events_{outbox_, options_.head_address, "a job event"};
  static constexpr size_t kEndedKept = 4096;
  RecentIds<std::string> ended_{kEndedKept};  // submission ids that ended or were refused
  std::map<std::string, JobProcess> jobs_;    // by submission id
};

}  // namespace orrery::node
