#include "core/src/redis_store.h"

#include <hiredis/hiredis.h>

#include <chrono>

#include "core/src/log.h"

namespace orrery {

namespace {
constexpr size_t kMaxBatch = 512;

redisContext* ConnectTo(const std::string& host, int port) {
  timeval tv{2, 0};
  redisContext* c = redisConnectWithTimeout(host.c_str(), port, tv);
  if (!c) return nullptr;
  if (c->err) {
    redisFree(c);
    return nullptr;
  }
  return c;
}

// Runs one command; returns the reply (caller frees) or null on a connection error.
redisReply* Command(redisContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  return static_cast<redisReply*>(redisCommandArgv(c, int(argv.size()), ptrs.data(), lens.data()));
}
}  // namespace

Result<std::shared_ptr<RedisStateStore>> RedisStateStore::Connect(const std::string& address, const std::string& cluster) {
  std::string a = address.rfind("redis://", 0) == 0 ? address.substr(8) : address;
  size_t colon = a.rfind(':');
  if (colon == std::string::npos) return Status::InvalidArgument("Redis address must be host:port, got " + address);
  std::string host = a.substr(0, colon);
  int port = std::atoi(a.c_str() + colon + 1);
  std::shared_ptr<RedisStateStore> store(new RedisStateStore(host, port, cluster));
  store->read_ctx_ = ConnectTo(host, port);
  if (!store->read_ctx_) return Status::Unavailable("cannot connect to Redis at " + address);
  redisReply* r = Command(store->read_ctx_, {"PING"});
  bool ok = r && r->type != REDIS_REPLY_ERROR;
  if (r) freeReplyObject(r);
  if (!ok) return Status::Unavailable("Redis at " + address + " did not answer PING");
  store->writer_ = std::thread([s = store.get()] { s->WriterLoop(); });
  return store;
}

RedisStateStore::RedisStateStore(std::string host, int port, std::string cluster)
    : host_(std::move(host)), port_(port), cluster_(std::move(cluster)) {}

RedisStateStore::~RedisStateStore() {
  Flush(2000);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (read_ctx_) redisFree(read_ctx_);
}

void RedisStateStore::Put(const std::string& table, const std::string& key, const std::string& json) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back({"HSET", KeyFor(table), key, json});
  ++queued_;
  cv_.notify_one();
}

void RedisStateStore::Delete(const std::string& table, const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back({"HDEL", KeyFor(table), key});
  ++queued_;
  cv_.notify_one();
}

void RedisStateStore::Publish(const std::string& event_json) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back({"PUBLISH", KeyFor("events"), event_json});
  ++queued_;
  cv_.notify_one();
}

void RedisStateStore::StreamAdd(const std::string& stream, const StreamEntry& fields) {
  std::vector<std::string> cmd{"XADD", KeyFor(stream), "*"};
  for (const auto& [f, v] : fields) {
    cmd.push_back(f);
    cmd.push_back(v);
  }
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(cmd));
  ++queued_;
  cv_.notify_one();
}

bool RedisStateStore::Flush(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t target = queued_;
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return written_ >= target || stop_; });
}

std::map<std::string, std::string> RedisStateStore::GetAll(const std::string& table) {
  std::map<std::string, std::string> out;
  std::lock_guard<std::mutex> lock(read_mu_);
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!read_ctx_) read_ctx_ = ConnectTo(host_, port_);
    if (!read_ctx_) break;
    redisReply* r = Command(read_ctx_, {"HGETALL", KeyFor(table)});
    if (!r) {
      redisFree(read_ctx_);
      read_ctx_ = nullptr;
      continue;
    }
    if (r->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i + 1 < r->elements; i += 2) {
        out[std::string(r->element[i]->str, r->element[i]->len)] =
            std::string(r->element[i + 1]->str, r->element[i + 1]->len);
      }
    }
    freeReplyObject(r);
    break;
  }
  return out;
}

redisContext* RedisStateStore::Reconnect(redisContext* old) {
  if (old) redisFree(old);
  return ConnectTo(host_, port_);
}

void RedisStateStore::WriterLoop() {
  redisContext* ctx = ConnectTo(host_, port_);
  while (true) {
    std::vector<std::vector<std::string>> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty() && stop_) break;
      while (!queue_.empty() && batch.size() < kMaxBatch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    // Pipelined: append every command, then read every reply. On a connection error the
    // batch is retried on a new connection (commands are idempotent writes).
    bool done = false;
    for (int attempt = 0; attempt < 50 && !done; ++attempt) {
      if (!ctx) {
        ctx = Reconnect(nullptr);
        if (!ctx) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));  // retry backoff, not a test wait
          continue;
        }
      }
      for (const auto& cmd : batch) {
        std::vector<const char*> ptrs;
        std::vector<size_t> lens;
        for (const auto& a : cmd) {
          ptrs.push_back(a.data());
          lens.push_back(a.size());
        }
        redisAppendCommandArgv(ctx, int(cmd.size()), ptrs.data(), lens.data());
      }
      bool ok = true;
      for (size_t i = 0; i < batch.size(); ++i) {
        void* reply = nullptr;
        if (redisGetReply(ctx, &reply) != REDIS_OK) {
          ok = false;
          break;
        }
        auto* r = static_cast<redisReply*>(reply);
        if (r && r->type == REDIS_REPLY_ERROR) LOG_WARN(std::string("Redis refused a write: ") + r->str);
        if (r) freeReplyObject(r);
      }
      if (ok) {
        done = true;
      } else {
        LOG_WARN("lost the Redis connection; reconnecting");
        ctx = Reconnect(ctx);
      }
    }
    if (!done) LOG_ERROR("dropped " + std::to_string(batch.size()) + " state writes: Redis is unreachable");
    {
      std::lock_guard<std::mutex> lock(mu_);
      written_ += batch.size();
    }
    cv_.notify_all();
  }
  if (ctx) redisFree(ctx);
}

}  // namespace orrery
