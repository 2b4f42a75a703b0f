#include "actors/src/job_registration.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "actors/src/errors_util.h"
#include "core/internal/file_hash.h"
#include "core/internal/log.h"
#include "orrery/errors.h"

namespace orrery::runtime {

namespace {
constexpr int kClientConnectTimeoutMs = 5000;
}  // namespace

proto::JobMsg JobInfo(const ProcessIdentity& self, const Config& config, bool alive) {
  proto::JobMsg m;
  m.job_id = self.job.Binary();
  m.driver_address = self.address;
  m.pid = int(getpid());
  m.namespace_ = config.namespace_.empty() ? "default" : config.namespace_;
  m.entrypoint = self.argv.empty() ? "" : self.argv[0];
  m.alive = alive;
  // A driver that `orrery job submit` started names its submission (docs/jobs.md).
  if (const char* sid = std::getenv("ORRERY_SUBMISSION_ID"); sid && std::strlen(sid) <= 64)
    m.submission_id = sid;
  m.tasks_submitted = self.submitted.load(std::memory_order_relaxed);
  return m;
}

void JobRegistration::Register() {
  if (const char* c = std::getenv("ORRERY_CLIENT_ONLY"); c && std::string(c) == "1") {
    // Inspection tools (`orrery status`): no job, no executable upload; still check, with
    // a short deadline, that the head answers.
    head_.ClusterInfo(kClientConnectTimeoutMs);
    return;
  }
  if (!config_.address.empty()) {
    // A cluster: nodes on other hosts may lack this executable and fetch it from the head.
    self_.binary_hash = HashFile(self_.argv[0]);
    self_.arch = MachineArch();
  }
  auto m = JobInfo(self_, config_, true);
  m.binary_hash = self_.binary_hash;
  m.arch = self_.arch;
  auto ack = head_.RegisterJob(m);
  if (!ack.ok && ack.error_kind == proto::ErrorKind::kNeedBinary) {
    UploadExecutable();
    ack = head_.RegisterJob(m);
  }
  if (!ack.ok) ThrowKind(ack.error_kind, "the head refused the job: " + ack.message);
  registered_ = true;
  heartbeats_.Start(kHeartbeatPeriodS, [this] { Heartbeat(); });
}

void JobRegistration::UploadExecutable() {
  std::ifstream in(self_.argv[0], std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  proto::BinaryMsg put{0, "", self_.binary_hash, self_.arch, true, ""};
  put.job_id = self_.job.Binary();  // the head stores only the executable this job registered
  auto stored = head_.PutBinary(put, bytes);
  if (!stored.ok)
    throw ConnectionError("the head could not store this program's executable: " + stored.message);
}

void JobRegistration::End(int timeout_ms) {
  heartbeats_.Stop();
  if (!registered_.exchange(false)) return;
  // Acknowledged, so that the head has freed the job's actors, names and leases before this
  // process exits (a message still queued at exit is lost). A head that does not answer
  // costs timeout_ms; it then ends the job when the heartbeats stop.
  try {
    head_.RegisterJob(JobInfo(self_, config_, false), timeout_ms);
  } catch (const Error& e) {
    LOG_WARN(std::string("the head did not acknowledge the end of the job: ") + e.what());
  }
}

void JobRegistration::Heartbeat() {
  if (!registered_) return;
  // With its executable's hash: a head that lost the job (a Redis that lost its data) takes
  // the heartbeat as the registration, and the job's work names that executable.
  auto m = JobInfo(self_, config_, true);
  m.binary_hash = self_.binary_hash;
  m.arch = self_.arch;
  head_.JobHeartbeat(m);
}

}  // namespace orrery::runtime
