// Retention of ended records (docs/redis-schema.md "Retention"): a StateStore that passes
// everything on to the store it wraps and, on the way, notes every record of the history
// tables (nodes, actors, jobs, train_runs, submissions) that has ended (a terminal state
// and an `end_time`). Trim deletes the records ended longer than the history TTL ago, in
// bounded batches, after asking the head whether each may go (the head then drops its
// in-memory copy). Records read back with GetAll when a head starts are noted too, so
// records restored from Redis still expire. Put, Delete and GetAll may come from any thread
// (a lock); Trim and the callbacks run on the head's inbox thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/internal/state_store.h"
#include "core/internal/thread_annotations.h"

namespace orrery::scheduler {

// The tables whose ended records expire.
inline constexpr const char* kHistoryTables[] = {"nodes", "actors", "jobs", "train_runs",
                                                 "submissions"};

// When the record `json` of `table` ended, in seconds since the epoch, or nothing while it
// has not (or cannot be told: a record that is not a JSON object, has no positive finite
// `end_time`, or is not in a terminal state is never expired). Terminal: a node whose
// `alive` is false; a `state` or `status` of DEAD, FINISHED, ERRORED, FAILED, STOPPED or
// SUCCEEDED. `json` is untrusted.
std::optional<double> EndedAt(std::string_view table, std::string_view json);
// Whether a record that ended at `end_time` has outlived `ttl_s` at wall time `now`.
inline bool Expired(double end_time, double now, double ttl_s) { return end_time + ttl_s <= now; }
// How often Trim runs for a TTL: every ttl/4, at most every 60 s and at least 1 s apart.
double TrimIntervalS(double ttl_s);

class RetentionStore final : public StateStore {
 public:
  // A record's entity may go (true: its in-memory copy is dropped, the record is deleted),
  // or is still in use (false: kept, asked again one TTL later). Inbox thread.
  using Forget = std::function<bool(const std::string& table, const std::string& key)>;
  static constexpr size_t kMaxBatch = 1000;  // records deleted per Trim at most

  RetentionStore(std::shared_ptr<StateStore> inner, double ttl_s);
  void SetForget(Forget forget) { forget_ = std::move(forget); }

  void Put(const std::string& table, const std::string& key, const std::string& json) override
      EXCLUDES(mu_);
  void Delete(const std::string& table, const std::string& key) override EXCLUDES(mu_);
  Result<std::map<std::string, std::string>> GetAll(const std::string& table) override
      EXCLUDES(mu_);
  void Publish(const std::string& event_json) override { inner_->Publish(event_json); }
  void StreamAdd(const std::string& stream, int64_t seq, const StreamEntry& fields) override {
    inner_->StreamAdd(stream, seq, fields);
  }
  void StreamDelete(const std::string& stream) override { inner_->StreamDelete(stream); }
  void WhenWritten(std::function<void()> done) override { inner_->WhenWritten(std::move(done)); }

  // Deletes up to kMaxBatch expired records (and a train run's metrics stream) when at least
  // TrimIntervalS has passed since the last trim (`mono`: monotonic seconds; `wall`: seconds
  // since the epoch). Returns how many records were deleted.
  size_t Trim(double mono, double wall) EXCLUDES(mu_);
  // Ended records waiting to expire (for tests and the log).
  size_t noted() const EXCLUDES(mu_);

 private:
  using Key = std::pair<std::string, std::string>;  // (table, key)
  void NoteLocked(const std::string& table, const std::string& key, std::string_view json)
      REQUIRES(mu_);
  void UnnoteLocked(const Key& k) REQUIRES(mu_);
  // The expired records due at `wall`, oldest first, at most kMaxBatch.
  std::vector<Key> TakeDue(double wall) EXCLUDES(mu_);

  std::shared_ptr<StateStore> inner_;
  double ttl_s_;
  Forget forget_;
  double next_trim_ = 0;  // monotonic; inbox thread only
  mutable Mutex mu_;
  // When each noted record is due to go (wall seconds), and the same ordered by that time.
  std::map<Key, double> due_ GUARDED_BY(mu_);
  std::set<std::pair<double, Key>> by_due_ GUARDED_BY(mu_);
};

}  // namespace orrery::scheduler
