// Reading the cluster's log streams and records from Redis for `orrery logs` and
// `orrery job` (docs/logs.md, docs/redis-schema.md): the CLI reads, only the head writes.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "orrery/status.h"

struct redisContext;

namespace orrery::cli {

struct LogEntry {
  std::string id;  // the stream entry id, to read on from
  std::map<std::string, std::string> fields;
};

class RedisReader {
 public:
  static Result<std::unique_ptr<RedisReader>> Connect(const std::string& address,
                                                      const std::string& password,
                                                      const std::string& cluster = "default");
  ~RedisReader();
  // Entries of stream `name` (orrery:<cluster>:<name>) after `after` ("0": from the start),
  // at most `count`; waits up to block_ms (0: not at all) when there are none yet.
  Result<std::vector<LogEntry>> Read(const std::string& name, const std::string& after, int count,
                                     int block_ms);
  // One record of a table (HGET); NotFound when there is none.
  Result<std::string> Record(const std::string& table, const std::string& key);

 private:
  explicit RedisReader(redisContext* c, std::string cluster)
      : c_(c), cluster_(std::move(cluster)) {}
  redisContext* c_;
  std::string cluster_;
};

// A log entry as `orrery logs` prints it: each line of its text with its source as prefix,
// "(Counter pid=4242, node=ab12cd) ..." (control bytes escaped).
std::string FormatLogEntry(const LogEntry& e, bool with_prefix);

}  // namespace orrery::cli
