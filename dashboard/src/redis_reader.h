// A read-only Redis client for the dashboard (docs/redis-schema.md): it reads the head's
// tables (hashes `orrery:<cluster>:<table>`) and a training run's metrics stream, and
// never writes. Every call has a connect and a command timeout, so a Redis that is down or
// stuck costs a request at most about a second. After a failed call the connection is
// dropped and the next call connects again.
//
// Thread-safe: calls are serialized on one connection (the dashboard's requests are few).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/internal/thread_annotations.h"
#include "orrery/status.h"

struct redisContext;
struct redisReply;

namespace orrery::dashboard {

// id -> the record's JSON text, as stored in the hash.
using Table = std::map<std::string, std::string>;

// One stream entry: its Redis id and its field/value pairs, in order.
struct StreamEntry {
  std::string id;
  std::vector<std::pair<std::string, std::string>> fields;
};

class RedisReader {
 public:
  // `address` is host:port (a leading redis:// is accepted); `cluster` names the keys;
  // `password` authenticates every connection ("" for a Redis without one; a Redis that
  // wants one answers PermissionDenied). Does not connect yet: the first call does.
  RedisReader(std::string address, std::string cluster = "default", int timeout_ms = 1000,
              std::string password = "");
  ~RedisReader();
  RedisReader(const RedisReader&) = delete;
  RedisReader& operator=(const RedisReader&) = delete;

  const std::string& address() const { return address_; }

  // PING. Unavailable (or Timeout) when Redis cannot be reached.
  Status Ping() EXCLUDES(mu_);
  // HGETALL orrery:<cluster>:<table>. An absent key is an empty table.
  Result<Table> GetTable(const std::string& table) EXCLUDES(mu_);
  // HGET orrery:<cluster>:<table> <id>; NotFound when there is no such field.
  Result<std::string> GetRecord(const std::string& table, const std::string& id) EXCLUDES(mu_);
  // XRANGE orrery:<cluster>:train:<run_id>:metrics - + (at most `max_entries`, oldest first).
  Result<std::vector<StreamEntry>> RunMetrics(const std::string& run_id,
                                              size_t max_entries = 100000);
  // The newest `max_entries` of stream orrery:<cluster>:<stream> (XREVRANGE), oldest first:
  // a submitted job's output ("job_logs:<id>") or the workers' lines ("logs").
  Result<std::vector<StreamEntry>> LastEntries(const std::string& stream, size_t max_entries);

 private:
  struct ReplyFree {
    void operator()(redisReply* r) const;
  };
  using Reply = std::unique_ptr<redisReply, ReplyFree>;

  // Runs one command, connecting first if needed. An error reply from Redis is Internal;
  // a lost or timed-out connection is Unavailable and is dropped.
  Result<Reply> Command(const std::vector<std::string>& argv) REQUIRES(mu_);
  // Runs an XRANGE-like command and parses its entries ([id, [field, value, ...]] each).
  Result<std::vector<StreamEntry>> Range(const std::vector<std::string>& command) EXCLUDES(mu_);
  Status EnsureConnected() REQUIRES(mu_);
  void Drop() REQUIRES(mu_);
  std::string Key(const std::string& suffix) const { return "orrery:" + cluster_ + ":" + suffix; }

  // Set by the constructor, read-only after: no lock.
  std::string address_;
  std::string host_;
  int port_ = 0;
  std::string cluster_;
  int timeout_ms_;
  std::string password_;
  Status parse_status_;

  Mutex mu_;
  redisContext* ctx_ GUARDED_BY(mu_) = nullptr;
};

}  // namespace orrery::dashboard
