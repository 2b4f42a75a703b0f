// StateStore on Redis (docs/redis-schema.md): table T of cluster C is the hash
// `orrery:<C>:<T>` (field = id, value = JSON); events are published on
// `orrery:<C>:events`. Writes are sent pipelined by a background thread, so no caller waits
// on Redis; reads (GetAll, used when the head starts) are synchronous.
//
// No record write is ever dropped (docs/redis-schema.md "How the head writes"): the store
// keeps the latest value of every record it wrote or read (a mirror, as large as the
// records themselves) and a set of the (table, key) pairs not yet written, so a record
// changed many times while Redis is away is written once, with its latest value. After a
// lost connection the writer reconnects with backoff, for as long as it takes, and then
// rewrites every record of the mirror and removes from the tables read with GetAll the
// fields the mirror no longer has: Redis matches the writer's state again even if it
// restarted empty or from an older snapshot. Stream entries carry explicit ids, so one
// resent after a partial write is refused by Redis as a duplicate; events (PUBLISH) are
// sent at most once and, like Redis pub/sub itself, may be lost in an outage.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/internal/state_store.h"
#include "core/internal/thread_annotations.h"
#include "orrery/status.h"

struct redisContext;

namespace orrery {

// The Redis password (docs/redis-schema.md "Password"): the content of `file`, else of the
// file ORRERY_REDIS_PASSWORD_FILE names (security::ReadSecretFile); "" when neither is given.
Result<std::string> ReadRedisPassword(const std::string& file);

// Authenticates a new connection to the Redis at `address` (for messages): AUTH with
// `password`, or, without one, a PING, which a Redis that wants a password refuses.
// PermissionDenied naming Redis's answer when it wants a password, refuses this one, or has
// none but one was given; Unavailable when the connection fails. Never puts the password in
// a message.
Status AuthenticateRedis(redisContext* c, const std::string& password, const std::string& address);

class RedisStateStore : public StateStore {
 public:
  // Connects to host:port and authenticates with `password` ("" for a Redis without one);
  // every reconnection authenticates again. Unavailable when Redis does not answer,
  // PermissionDenied when it refuses the password or wants one (AuthenticateRedis).
  static Result<std::shared_ptr<RedisStateStore>> Connect(const std::string& address,
                                                          const std::string& cluster,
                                                          const std::string& password = "");
  // Writes what is pending for up to 2 s, then gives up on it (logged).
  ~RedisStateStore() override;

  void Put(const std::string& table, const std::string& key, const std::string& json) override
      EXCLUDES(mu_);
  void Delete(const std::string& table, const std::string& key) override EXCLUDES(mu_);
  Result<std::map<std::string, std::string>> GetAll(const std::string& table) override
      EXCLUDES(read_mu_, mu_);
  void Publish(const std::string& event_json) override EXCLUDES(mu_);
  // XADD orrery:<cluster>:<stream> MAXLEN ~ kMaxStreamLength <seq>-1 field value ...;
  // Redis refuses (and the store ignores) an entry whose seq is not above the stream's last,
  // and trims the oldest entries of a stream past about kMaxStreamLength.
  static constexpr int64_t kMaxStreamLength = 100000;
  // Log streams ("logs", "job_logs:<id>"; docs/logs.md) keep fewer entries: each holds up
  // to 16 KiB of text.
  static constexpr int64_t kMaxLogStreamLength = 10000;
  void StreamAdd(const std::string& stream, int64_t seq, const StreamEntry& fields) override
      EXCLUDES(mu_);
  // Queued with the stream entries (DEL), so it follows every entry appended before it.
  void StreamDelete(const std::string& stream) override EXCLUDES(mu_);
  // Every change has a generation number; `done` runs once no change of a generation up to
  // the current one is still unwritten (waiting in the dirty set, the stream queue, a batch
  // in flight or a rewrite after a lost connection).
  void WhenWritten(std::function<void()> done) override EXCLUDES(mu_);
  // Blocks until nothing is left to write (or the timeout passes); true when written.
  bool Flush(int timeout_ms = 5000) EXCLUDES(mu_);
  metrics::Histogram WriteLatency() const override EXCLUDES(latency_mu_);
  std::string KeyFor(const std::string& table) const { return "orrery:" + cluster_ + ":" + table; }

 private:
  RedisStateStore(std::string host, int port, std::string cluster, std::string password);
  void WriterLoop() EXCLUDES(mu_);
  // One pipelined batch of dirty records, stream entries and events; false when the
  // connection failed (the caller reconnects and resyncs).
  bool WriteBatch(redisContext* ctx) EXCLUDES(mu_);
  // Rewrites the whole mirror; false when the connection failed.
  bool Resync(redisContext* ctx) EXCLUDES(mu_);
  bool HasWorkLocked() const REQUIRES(mu_);
  void MarkDirtyLocked(const std::string& table, const std::string& key, bool deleted, uint64_t gen)
      REQUIRES(mu_);
  // Advances written_gen_ as far as nothing unwritten holds it back and takes the waiters it
  // satisfies (the caller runs them without the lock).
  std::vector<std::function<void()>> TakeSatisfiedLocked() REQUIRES(mu_);
  void RunSatisfied() EXCLUDES(mu_);

  // Set in the constructor, read-only after: no lock.
  std::string host_;
  int port_;
  std::string cluster_;
  std::string password_;  // "" for a Redis without one
  // GetAll's synchronous connection (the writer thread has its own, local to WriterLoop).
  Mutex read_mu_ ACQUIRED_BEFORE(mu_);
  redisContext* read_ctx_ GUARDED_BY(read_mu_) = nullptr;

  Mutex mu_;
  CondVar cv_;
  // table -> key -> JSON
  std::map<std::string, std::map<std::string, std::string>> mirror_ GUARDED_BY(mu_);
  // (table, key) to write -> the generation of its latest change.
  std::map<std::pair<std::string, std::string>, uint64_t> dirty_ GUARDED_BY(mu_);
  // Tables read with GetAll: the mirror holds all of them.
  std::set<std::string> authoritative_ GUARDED_BY(mu_);
  bool resync_ GUARDED_BY(mu_) = false;  // the whole mirror must be rewritten
  std::deque<std::string> events_ GUARDED_BY(mu_);
  // (generation, XADD or DEL)
  std::deque<std::pair<uint64_t, std::vector<std::string>>> stream_adds_ GUARDED_BY(mu_);
  bool in_flight_ GUARDED_BY(mu_) = false;
  bool resync_in_flight_ GUARDED_BY(mu_) = false;
  uint64_t gen_ GUARDED_BY(mu_) = 0;          // the latest change's generation
  uint64_t written_gen_ GUARDED_BY(mu_) = 0;  // every change up to this one is written
  // The oldest change in the batch being sent.
  uint64_t in_flight_min_gen_ GUARDED_BY(mu_) = UINT64_MAX;
  std::vector<std::pair<uint64_t, std::function<void()>>> waiters_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  mutable Mutex latency_mu_;
  metrics::Histogram latency_ GUARDED_BY(latency_mu_){WriteLatencyBounds()};
  // Started by Connect and joined by the destructor, both on the owner's thread.
  std::thread writer_;
};

}  // namespace orrery
