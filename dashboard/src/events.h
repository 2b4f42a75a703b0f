// Live updates for the dashboard's pages (docs/dashboard.md "Live updates"): the
// server-sent events of GET /api/events. One ChangeFeed per dashboard reads the tables the
// pages show at most once a second, whoever asks, and numbers each state of them: a
// version that grows whenever a table's content or Redis's reachability changed. Each open
// stream sends an event when the version moved since its last one, and a heartbeat comment
// when it has been quiet for kHeartbeat. At most kMaxStreams streams are open at once.
// Thread-safe: the handler threads of every stream share one feed.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/internal/thread_annotations.h"
#include "dashboard/src/redis_reader.h"

namespace orrery::dashboard {

// What the pages show, as of one read.
struct FeedState {
  uint64_t version = 0;              // 0: never read
  std::vector<std::string> changed;  // the tables that changed to reach this version
  bool redis_ok = false;
  std::string redis_error;
};

class ChangeFeed {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kReadEvery = std::chrono::seconds(1);
  static constexpr auto kHeartbeat = std::chrono::seconds(15);
  static constexpr int kMaxStreams = 8;
  // The tables read (the pages' records).
  static constexpr const char* kTables[] = {"nodes",      "actors",      "placement_groups", "jobs",
                                            "train_runs", "submissions", "autoscaler"};

  // `reader` may be null (no Redis configured: every state says so); it must outlive this.
  explicit ChangeFeed(RedisReader* reader) : reader_(reader) {}

  // The state as of at most kReadEvery before `now`: reads Redis first when the last read is
  // older. Concurrent callers share one read.
  FeedState Current(Clock::time_point now) EXCLUDES(mu_, read_mu_);
  // Takes one read: a digest per table (`ok`), or why Redis could not be read. Moves the
  // version when anything differs from the previous read. Returns the state.
  FeedState Observe(const std::map<std::string, uint64_t>& digests, bool ok,
                    const std::string& error) EXCLUDES(mu_);

  // A stream may open (false beyond kMaxStreams open); each open one is closed once.
  bool OpenStream() EXCLUDES(mu_);
  void CloseStream() EXCLUDES(mu_);

 private:
  RedisReader* reader_;
  Mutex read_mu_ ACQUIRED_BEFORE(mu_);  // one Redis read at a time
  Mutex mu_;
  FeedState state_ GUARDED_BY(mu_);
  std::map<std::string, uint64_t> digests_ GUARDED_BY(mu_);
  Clock::time_point read_at_ GUARDED_BY(mu_);
  int streams_ GUARDED_BY(mu_) = 0;
};

// A table's digest: FNV-1a over its fields and values, in key order.
uint64_t TableDigest(const Table& table);
// One server-sent event for `state`: "id: <version>\nevent: change\ndata: <JSON>\n\n", the
// JSON being {"version", "changed": [...], "redis": {"ok", "error"}}.
std::string FormatEvent(const FeedState& state);
inline constexpr const char* kHeartbeatComment = ": heartbeat\n\n";

}  // namespace orrery::dashboard
