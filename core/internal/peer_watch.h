// PeerWatch: which of a set of peer processes still answer pings (kPing/kPong). A node
// watches the owners of the objects it holds; an owner watches the processes that borrow its
// objects (docs/objects.md "Lifetime"). A peer that misses a round is probed
// (core/internal/connect_probe.h): dead at once when nothing listens at its address any more,
// else only after dead_s without an answer, so that a paused or swamped process keeps what
// it owns (docs/architecture.md "Failure detection"). Not thread-safe: its user locks.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/internal/connect_probe.h"
#include "core/internal/protocol_wire.h"

namespace orrery {

class PeerWatch {
 public:
  struct Ping {
    uint64_t request_id;
    std::string address;
  };

  // `prober`: null to rely on dead_s alone.
  PeerWatch(double period_s, double dead_s, std::unique_ptr<Prober> prober = nullptr)
      : period_s_(period_s), dead_s_(dead_s), prober_(std::move(prober)) {}

  // Whether Tick would start a round now (a user may skip listing its peers until then).
  bool Due(double now) const { return now - last_round_ >= period_s_; }

  // Every period_s (else nothing): forgets the peers no longer in `peers`, moves those that
  // have not answered for dead_s since they were first watched, or that a probe found gone,
  // into *dead, probes those that missed a round, and returns the pings to send to the rest.
  std::vector<Ping> Tick(double now, const std::set<std::string>& peers,
                         std::vector<std::string>* dead) {
    now_ = now;
    std::vector<Ping> pings;
    if (!Due(now)) return pings;
    last_round_ = now;
    for (auto it = seen_.begin(); it != seen_.end();) {
      it = peers.count(it->first) ? std::next(it) : seen_.erase(it);
    }
    pinged_.clear();
    base_ = proto::RequestIdBase() + uint64_t(now * 1000) * 4096;
    std::set<std::string> gone;
    if (prober_) {
      for (auto& [peer, outcome] : prober_->Take())
        if (outcome == ProbeOutcome::kRefused) gone.insert(peer);
    }
    for (const auto& peer : peers) {
      if (peer.empty()) continue;
      auto [seen, first] = seen_.emplace(peer, now);
      double silent = first ? 0 : now - seen->second;
      // A refused probe counts only while the peer is still silent (no answer since).
      if (silent > dead_s_ || (silent > period_s_ && gone.count(peer))) {
        dead->push_back(peer);
        seen_.erase(seen);
        continue;
      }
      if (prober_ && silent > period_s_) prober_->Probe(peer, peer);
      pings.push_back(Ping{base_ + pinged_.size(), peer});
      pinged_.push_back(peer);
    }
    return pings;
  }

  // A kPong: false when it answers no ping of the last round.
  bool OnPong(uint64_t request_id) {
    if (request_id < base_ || request_id - base_ >= pinged_.size()) return false;
    seen_[pinged_[request_id - base_]] = now_;
    return true;
  }

  // The peer is known to be gone (or back): watched afresh from the next round.
  void Forget(const std::string& peer) { seen_.erase(peer); }
  // How long `peer` has not answered (0 when not watched).
  double SilentFor(const std::string& peer) const {
    auto it = seen_.find(peer);
    return it == seen_.end() ? 0 : now_ - it->second;
  }

 private:
  double period_s_;
  double dead_s_;
  std::unique_ptr<Prober> prober_;
  std::map<std::string, double> seen_;  // when each peer last answered (or was first seen)
  std::vector<std::string> pinged_;     // the last round's peers: request id base_ + index
  uint64_t base_ = 0;
  double last_round_ = 0;
  double now_ = 0;
};

}  // namespace orrery
