#include "train/src/report_collector.h"

#include <algorithm>
#include <chrono>

namespace orrery::train {

using internal::TrainWorker;

ReportCollector::ReportCollector(std::vector<ActorHandle<TrainWorker>> workers, int64_t first_index)
    : workers_(std::move(workers)),
      seen_(workers_.size(), first_index - 1),
      done_(workers_.size(), false),
      polls_(workers_.size()),
      polling_(workers_.size(), false),
      next_final_(first_index) {}

std::optional<ReportCollector::Failure> ReportCollector::PollOnce(int poll_ms) {
  std::vector<ObjectRef<PollReplyMsg>> open;
  std::vector<size_t> open_rank;
  for (size_t r = 0; r < workers_.size(); ++r) {
    if (done_[r]) continue;
    if (!polling_[r]) {
      polls_[r] = workers_[r].Task(&TrainWorker::Poll).Remote(seen_[r], poll_ms);
      polling_[r] = true;
    }
    open.push_back(polls_[r]);
    open_rank.push_back(r);
  }
  if (open.empty()) return std::nullopt;
  auto ready = Wait(open, 1, 2 * poll_ms + 1000).ready;
  std::set<std::string> ready_ids;
  for (const auto& ref : ready) ready_ids.insert(ref.ID().Binary());
  for (size_t k = 0; k < open.size(); ++k) {
    if (!ready_ids.count(open[k].ID().Binary())) continue;
    size_t r = open_rank[k];
    polling_[r] = false;
    PollReplyMsg reply;
    try {
      reply = *Get(open[k]);
    } catch (const ActorDiedError& e) {
      return Failure{r, true, e.what()};
    }
    if (auto failure = Absorb(r, reply)) return failure;
  }
  return std::nullopt;
}

std::optional<ReportCollector::Failure> ReportCollector::Absorb(size_t r,
                                                                const PollReplyMsg& reply) {
  for (const auto& rep : reply.reports) {
    if (rep.index <= seen_[r]) continue;
    seen_[r] = rep.index;
    if (!rep.checkpoint_path.empty()) checkpoint_of_[rep.index] = rep.checkpoint_path;
    if (r == 0) rank0_[rep.index] = rep;
  }
  if (!reply.done) return std::nullopt;
  done_[r] = true;
  if (!reply.failed) return std::nullopt;
  if (reply.process_failed) return Failure{r, true, reply.error_message};
  return Failure{r, false, reply.error_type + ": " + reply.error_message};
}

std::optional<std::pair<ReportMsg, std::string>> ReportCollector::TakeComplete() {
  auto it = rank0_.find(next_final_);
  if (it == rank0_.end()) return std::nullopt;
  for (size_t r = 0; r < workers_.size(); ++r) {
    if (seen_[r] < next_final_ && !done_[r]) return std::nullopt;
  }
  return TakeNext();
}

std::pair<ReportMsg, std::string> ReportCollector::TakeNext() {
  auto it = rank0_.find(next_final_);
  std::pair<ReportMsg, std::string> out{std::move(it->second), ""};
  rank0_.erase(it);
  if (auto c = checkpoint_of_.find(next_final_); c != checkpoint_of_.end()) {
    out.second = c->second;
    checkpoint_of_.erase(c);
  }
  ++next_final_;
  return out;
}

std::vector<std::pair<ReportMsg, std::string>> ReportCollector::SettleAfterFailure(size_t failed,
                                                                                   int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto caught_up = [&] {
    for (size_t r = 0; r < workers_.size(); ++r) {
      if (!done_[r] && seen_[r] < seen_[failed]) return false;
    }
    return true;
  };
  while (!caught_up() && std::chrono::steady_clock::now() < deadline) {
    (void)PollOnce(100);  // another failure only ends what it can still add
  }
  std::vector<std::pair<ReportMsg, std::string>> out;
  auto everyone = [this] {
    return std::all_of(seen_.begin(), seen_.end(), [this](int64_t s) { return s >= next_final_; });
  };
  while (rank0_.count(next_final_) && everyone()) out.push_back(TakeNext());
  return out;
}

bool ReportCollector::AllDone() const {
  return std::all_of(done_.begin(), done_.end(), [](bool d) { return d; });
}

std::set<int64_t> ReportCollector::Unfinished() const {
  std::set<int64_t> out;
  if (seen_.empty()) return out;
  int64_t last = *std::max_element(seen_.begin(), seen_.end());
  for (int64_t i = next_final_; i <= last; ++i) out.insert(i);
  return out;
}

std::set<int64_t> ReportCollector::OrphanCheckpoints() const {
  std::set<int64_t> out;
  for (const auto& [index, path] : checkpoint_of_) out.insert(index);
  return out;
}

}  // namespace orrery::train
