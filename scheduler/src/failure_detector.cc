#include "scheduler/src/failure_detector.h"

#include <algorithm>

namespace orrery::scheduler {

namespace {
std::string Seconds(double s) { return std::to_string(int(s + 0.5)) + " s"; }

}  // namespace

FailureDetector::FailureDetector(FailurePolicy policy, std::unique_ptr<Prober> prober)
    : policy_(policy), prober_(std::move(prober)) {}

void FailureDetector::Advance(double now, bool caught_up) {
  if (last_now_ >= 0 && caught_up) clock_ += std::clamp(now - last_now_, 0.0, 2 * policy_.period_s);
  last_now_ = now;
}

void FailureDetector::Heard(const std::string& key, const std::string& address) {
  Peer& p = peers_[key];
  p.address = address;
  p.heard = clock_;
  p.refused = false;
  if (p.suspected) {
    p.suspected = false;
    p.cleared = true;
  }
}

void FailureDetector::Forget(const std::string& key) { peers_.erase(key); }

bool FailureDetector::Suspected(const std::string& key) const {
  auto it = peers_.find(key);
  return it != peers_.end() && it->second.suspected;
}

std::vector<FailureDetector::Verdict> FailureDetector::Tick() {
  for (auto& [key, outcome] : prober_->Take()) {
    auto it = peers_.find(key);
    // Only a probe of a peer still suspected counts: a heartbeat since then outranks it.
    if (it != peers_.end() && it->second.suspected && outcome == ProbeOutcome::kRefused)
      it->second.refused = true;
  }
  std::vector<Verdict> out;
  std::vector<std::string> dead;
  for (auto& [key, p] : peers_) {
    double silent = clock_ - p.heard;
    if (p.cleared) {
      p.cleared = false;
      out.push_back({key, Kind::kCleared, ""});
    }
    if (p.refused) {
      out.push_back({key, Kind::kDead,
                     "no heartbeat for " + Seconds(silent) + " and nothing listens at " +
                         p.address + " (its process is gone)"});
      dead.push_back(key);
    } else if (silent > policy_.tolerance_s) {
      out.push_back({key, Kind::kDead,
                     "no heartbeat for " + Seconds(silent) + " (the tolerance is " +
                         Seconds(policy_.tolerance_s) + ")"});
      dead.push_back(key);
    } else if (silent > policy_.suspect_after_s) {
      if (!p.suspected) {
        p.suspected = true;
        out.push_back({key, Kind::kSuspected, "no heartbeat for " + Seconds(silent)});
      }
      if (clock_ - p.probed >= policy_.period_s) {
        p.probed = clock_;
        prober_->Probe(key, p.address);
      }
    }
  }
  for (const auto& key : dead) peers_.erase(key);
  return out;
}

}  // namespace orrery::scheduler
