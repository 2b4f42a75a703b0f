// The probes of the peers of sending sockets that drain past their deadline (transport.h
// SendLimits::drain_s), shared by every thread of the process.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/internal/connect_probe.h"
#include "core/internal/thread_annotations.h"

namespace orrery::transport {

// A peer is probed with a connect that gives up after kProbeTimeoutS; at most
// kMaxProbeOutcomes answers are kept.
inline constexpr double kProbeTimeoutS = 1.0;
inline constexpr size_t kMaxProbeOutcomes = 4096;

// Probes the peers of sockets past their drain deadline, for every thread of the process.
class DrainProbes {
 public:
  void Ask(const std::string& address) EXCLUDES(mu_) {
    {
      MutexLock lock(&mu_);
      outcomes_.erase(address);  // an older answer says nothing of now
    }
    prober_->Probe(address, address);
  }
  // The outcome of the last probe of `address`, once it came.
  std::optional<ProbeOutcome> Take(const std::string& address) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (outcomes_.size() > kMaxProbeOutcomes) outcomes_.clear();  // peers come and go
    for (auto& [key, outcome] : prober_->Take()) outcomes_[key] = outcome;
    auto it = outcomes_.find(address);
    if (it == outcomes_.end()) return std::nullopt;
    return it->second;  // kept for other threads draining to the same peer
  }

 private:
  std::unique_ptr<Prober> prober_ = MakeConnectProber(kProbeTimeoutS);
  Mutex mu_;
  std::unordered_map<std::string, ProbeOutcome> outcomes_ GUARDED_BY(mu_);
};

inline DrainProbes& Probes() {
  static auto* probes = new DrainProbes();  // never destroyed: threads drain during exit
  return *probes;
}

}  // namespace orrery::transport
