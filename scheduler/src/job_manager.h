// The head's jobs: drivers' registrations, heartbeats and goodbyes, the executable each job
// registered (nodes run only those), and the executables kept for nodes that lack them.
// docs/architecture.md "The head"; docs/design-decisions.md "Nodes run only registered
// executables".
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "scheduler/src/head_context.h"

namespace orrery::scheduler {

struct JobEntry {
  proto::JobMsg info;
  bool alive = true;
  double last_seen = 0;
  double start_time = 0;  // wall clock, seconds since the epoch
  std::string end_cause;
  double end_time = 0;  // wall clock, seconds since the epoch; 0 while running
};

class JobManager {
 public:
  // `binary_dir`: where drivers' executables are kept.
  JobManager(HeadContext ctx, std::string binary_dir)
      : ctx_(std::move(ctx)), binary_dir_(std::move(binary_dir)) {}
  // Called when a job ends (its driver said goodbye or went silent), before the job's
  // record says so: its actors and leases go with it.
  void SetOnEnded(std::function<void(const std::string& job_id, const std::string& cause)> f) {
    on_ended_ = std::move(f);
  }

  // A driver's registration, heartbeat or goodbye (acknowledged once the job's resources are
  // free). A job whose executable the head lacks is answered NeedBinary.
  void OnRegister(const proto::JobMsg& m, double now);
  void OnPutBinary(const proto::BinaryMsg& m, const std::string& bytes);
  void OnFetchBinary(const proto::BinaryMsg& m) const;
  // The head's failure detector declared the driver of job `job_id` dead (`cause` says why):
  // the job ends, if it still runs.
  void DriverDied(const std::string& job_id, const std::string& cause);

  // Ok when `hash` and `argv` name the executable job `job_id` registered; the error (for
  // the requester) says what does not match. An executable that no job of this head
  // registered is never started.
  Status CheckExecutable(const std::string& job_id, const std::vector<std::string>& argv,
                         const std::string& hash) const;
  // Whether some job registered the executable with this hash (what a node asks before it
  // runs one).
  bool VouchesFor(const std::string& hash) const;
  bool IsAlive(const std::string& job_id) const;
  // Submitted jobs (submission_manager.h): whether the head keeps the executable `hash`;
  // that an upload of it is expected under `key` (a submission id); that the head vouches
  // for it to nodes from now on.
  bool HasBinary(const std::string& hash) const;
  void ExpectUpload(const std::string& key, const std::string& hash);
  // Whether the head keeps the working_dir package (folder_pack.h) `hash`.
  bool HasPackage(const std::string& hash) const;
  // What the kept packages may take on disk in all: past it, those used longest ago go.
  static constexpr uint64_t kPackageStoreBytes = uint64_t(8) << 30;
  void SetPackageStoreBytes(uint64_t bytes) { package_store_bytes_ = bytes; }
  // Marks the package `hash` as used now; false when the head does not keep it.
  bool TouchPackage(const std::string& hash) const;
  void Vouch(const std::string& hash) { vouched_.insert(hash); }
  // The inbox of the driver of job `job_id` (binary id) while it runs, else "".
  std::string DriverAddress(const std::string& job_id) const;
  size_t size() const { return jobs_.size(); }
  // Drops an ended job (by hex id) whose record expired (docs/redis-schema.md "Retention");
  // false, keeping it, while it runs.
  bool Forget(const std::string& job_hex);
  // Every job by binary id (the head's metrics count them by state and sum their tasks).
  const std::map<std::string, JobEntry>& all() const { return jobs_; }

  // Rebuilds the jobs from the "jobs" table; a running job's driver gets a grace period.
  void Restore(const TableRecords& records, double now);

 private:
  // Checks a new job's registration; escapes its free text. The error is for the driver.
  Status Admit(proto::JobMsg& m) const;
  void End(const std::string& job_id, const std::string& cause);
  void Persist(const std::string& job_id);
  std::string BinaryPath(const std::string& hash) const;
  std::string PackagePath(const std::string& hash) const;
  // Writes `bytes` as the file `path` (through a temporary file).
  Status StoreBinary(const std::string& path, const std::string& bytes) const;
  // A working_dir's package: data, stored for any peer (nodes only unpack it). With no bytes:
  // whether the head keeps it (NeedBinary when it does not).
  void OnPutPackage(const proto::BinaryMsg& m, const std::string& bytes);
  // Forgets the packages used longest ago, but `keep`, while they take more than
  // package_store_bytes_.
  void EvictPackages(const std::string& keep);

  HeadContext ctx_;
  std::string binary_dir_;
  std::function<void(const std::string&, const std::string&)> on_ended_;
  std::map<std::string, JobEntry> jobs_;  // by binary id
  // Jobs told to upload their executable (NeedBinary): job id -> the hash it registered. A
  // PutBinary is stored only for such a job and that hash.
  std::map<std::string, std::string> awaiting_upload_;
  std::set<std::string> vouched_;  // submitted jobs' executables
  uint64_t package_store_bytes_ = kPackageStoreBytes;
};

}  // namespace orrery::scheduler
