// How the head tells a slow peer from a dead one (docs/architecture.md "Failure detection").
//
// Nodes and drivers heartbeat every period from a thread of their own. A peer the head has
// not heard from for suspect_after_s is *suspected*: no new work is placed there and a
// direct probe is sent each period: a TCP connect to the peer's inbox. A refused connect
// means nothing listens there any more (the process is gone: killed, crashed, exited
// without a goodbye), and the peer is dead at once. A connect the kernel accepts (the
// process exists, perhaps paused or swamped) or one that is not answered (the host or the
// network is gone) keeps the peer suspected until tolerance_s of silence, then it is dead.
// A heartbeat clears the suspicion.
//
// Silence is counted on the detector's own clock, which runs only while the head's inbox is
// caught up (a heartbeat waiting unread in the socket is not silence) and by at most two
// periods per tick (a head that was itself paused does not find every peer silent when it
// resumes). Runs on the head's inbox thread; the prober does its I/O on its own thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/internal/connect_probe.h"

namespace orrery::scheduler {

struct FailurePolicy {
  double period_s = 1.0;         // how often peers heartbeat, and probes are sent
  double suspect_after_s = 2.0;  // silent this long: suspected, probed
  double tolerance_s = 30.0;     // silent this long: dead, whatever the probes say
};

using ::orrery::MakeConnectProber;
using ::orrery::ProbeOutcome;
using ::orrery::Prober;

class FailureDetector {
 public:
  enum class Kind { kSuspected, kCleared, kDead };
  struct Verdict {
    std::string key;
    Kind kind;
    std::string cause;  // for kSuspected and kDead
  };

  FailureDetector(FailurePolicy policy, std::unique_ptr<Prober> prober);

  // Moves the detector's clock to the head's monotonic `now`: the time since the last call
  // counts only when the inbox is caught up, and at most two periods of it.
  void Advance(double now, bool caught_up);
  // A heartbeat (or a registration) of `key`, whose inbox is `address`.
  void Heard(const std::string& key, const std::string& address);
  // `key` left (a goodbye, or declared dead): no longer watched.
  void Forget(const std::string& key);
  bool Suspected(const std::string& key) const;
  // What changed since the last call: peers newly suspected, cleared by a heartbeat, or dead.
  std::vector<Verdict> Tick();

  const FailurePolicy& policy() const { return policy_; }

 private:
  struct Peer {
    std::string address;
    double heard = 0;  // on the detector's clock
    bool suspected = false;
    bool cleared = false;   // suspected, then heard again: reported by the next Tick
    double probed = -1e18;  // when the last probe was sent, on the detector's clock
    bool refused = false;   // a probe found nothing listening
  };

  FailurePolicy policy_;
  std::unique_ptr<Prober> prober_;
  double clock_ = 0;
  double last_now_ = -1;
  std::map<std::string, Peer> peers_;
};

}  // namespace orrery::scheduler
