// A direct probe of a peer process: a TCP (or Unix socket) connect to its inbox address,
// which tells a process that is gone (nothing listens: the connect is refused) from one that
// exists but is silent (the kernel accepts the connection: paused, swamped) and from a host
// or network that does not answer. The head's failure detector and the object plane's peer
// watches use it (docs/architecture.md "Failure detection").
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace orrery {

enum class ProbeOutcome {
  kListening,  // the kernel accepted the connection: the process exists
  kRefused,    // nothing listens at the address: the process is gone
  kNoAnswer,   // no answer within the timeout (a host or network that is gone), or no address
};

// Connects to `address` (tcp://host:port or ipc://path), waiting at most timeout_ms. A
// tcp:// address whose inbox is a process of this host and user is asked at its same-host
// Unix socket (transport::local::Resolve), which its peers use too, and its TCP port only
// when nobody listens there.
ProbeOutcome ProbeAddress(const std::string& address, int timeout_ms);

// Sends probes and reports their outcomes. Thread-safe.
class Prober {
 public:
  virtual ~Prober() = default;
  // Probes `address` for `key`; the outcome is reported by a later Take(). A probe already
  // under way for `key` is not repeated.
  virtual void Probe(const std::string& key, const std::string& address) = 0;
  // The outcomes that arrived since the last call.
  virtual std::vector<std::pair<std::string, ProbeOutcome>> Take() = 0;
};

// Probes on a thread of its own (started by the first probe), at most timeout_s each.
std::unique_ptr<Prober> MakeConnectProber(double timeout_s);

}  // namespace orrery
