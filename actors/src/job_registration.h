// A driver's job (docs/architecture.md "Client runtime", docs/protocol.md "Ending a job"):
// registers the job with the head (uploading this program's executable when the head
// answers NeedBinary), heartbeats it once a second from a thread of its own (a busy inbox
// cannot hold the heartbeats up: docs/architecture.md "Failure detection"), and ends it.
//
// Thread-safety: Register and End are called by the thread that runs Init / Shutdown; the
// heartbeats run on their own thread.
#pragma once

#include <atomic>
#include <string>

#include "actors/src/head_client.h"
#include "actors/src/submission.h"
#include "core/internal/heartbeat_thread.h"
#include "orrery/config.h"

namespace orrery::runtime {

// The job as the head records it.
proto::JobMsg JobInfo(const ProcessIdentity& self, const Config& config, bool alive);

class JobRegistration {
 public:
  static constexpr double kHeartbeatPeriodS = 1.0;

  // `self` is written by Register (the executable's hash and arch, in cluster mode) before
  // any submission reads it. The references outlive the registration.
  JobRegistration(ProcessIdentity& self, const Config& config, HeadClient& head)
      : self_(self), config_(config), head_(head) {}

  // Throws ConnectionError when no head answers, the head's error kind when it refuses.
  // With ORRERY_CLIENT_ONLY=1 (inspection tools): registers nothing, only checks that the
  // head answers.
  void Register();
  // Waits up to timeout_ms for the head to acknowledge the end of the job; a head that does
  // not answer ends it when the heartbeats stop.
  void End(int timeout_ms);
  bool registered() const { return registered_; }

 private:
  // Stores this program's executable on the head (throws ConnectionError when it cannot).
  void UploadExecutable();
  // The heartbeat thread's beat.
  void Heartbeat();

  ProcessIdentity& self_;
  const Config& config_;
  HeadClient& head_;
  std::atomic<bool> registered_{false};
  HeartbeatThread heartbeats_;  // last: stopped before the rest goes
};

}  // namespace orrery::runtime
