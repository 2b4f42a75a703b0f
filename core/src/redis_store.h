// StateStore on Redis (DESIGN.md section 6): table T of cluster C is the hash
// `orrery:<C>:<T>` (field = id, value = JSON); events are published on
// `orrery:<C>:events`. Writes are queued and sent pipelined by a background thread, so no
// caller waits on Redis; reads (GetAll, used when the head starts) are synchronous.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/src/state_store.h"
#include "orrery/status.h"

struct redisContext;

namespace orrery {

class RedisStateStore : public StateStore {
 public:
  // Connects to host:port; Unavailable when Redis does not answer PING.
  static Result<std::shared_ptr<RedisStateStore>> Connect(const std::string& address, const std::string& cluster);
  ~RedisStateStore() override;

  void Put(const std::string& table, const std::string& key, const std::string& json) override;
  void Delete(const std::string& table, const std::string& key) override;
  std::map<std::string, std::string> GetAll(const std::string& table) override;
  void Publish(const std::string& event_json) override;
  // XADD orrery:<cluster>:<stream> * field value ..., e.g. a training run's metrics.
  void StreamAdd(const std::string& stream, const StreamEntry& fields) override;
  // Blocks until everything queued so far was written (or the timeout passes).
  bool Flush(int timeout_ms = 5000);
  std::string KeyFor(const std::string& table) const { return "orrery:" + cluster_ + ":" + table; }

 private:
  RedisStateStore(std::string host, int port, std::string cluster);
  void WriterLoop();
  redisContext* Reconnect(redisContext* old);

  std::string host_;
  int port_;
  std::string cluster_;
  std::mutex read_mu_;
  redisContext* read_ctx_ = nullptr;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<std::string>> queue_;
  uint64_t queued_ = 0, written_ = 0;
  bool stop_ = false;
  std::thread writer_;
};

}  // namespace orrery
