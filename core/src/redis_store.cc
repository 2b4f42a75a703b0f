#include "core/internal/redis_store.h"

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdlib>

#include "core/internal/log.h"
#include "core/internal/redis_connection.h"

namespace orrery {

namespace {
constexpr size_t kMaxBatch = 512;
// Bounds on what waits while Redis is unreachable (records are bounded by the mirror).
constexpr size_t kMaxQueuedEvents = 10000;
constexpr size_t kMaxQueuedStreamEntries = 100000;

}  // namespace

Result<std::shared_ptr<RedisStateStore>> RedisStateStore::Connect(const std::string& address,
                                                                  const std::string& cluster,
                                                                  const std::string& password) {
  std::string a = address.rfind("redis://", 0) == 0 ? address.substr(8) : address;
  size_t colon = a.rfind(':');
  if (colon == std::string::npos)
    return Status::InvalidArgument("Redis address must be host:port, got " + address);
  std::string host = a.substr(0, colon);
  int port = std::atoi(a.c_str() + colon + 1);
  std::shared_ptr<RedisStateStore> store(new RedisStateStore(host, port, cluster, password));
  {
    // Nothing else sees the store yet; the lock costs nothing and keeps the analysis exact.
    MutexLock lock(&store->read_mu_);
    Status why;
    store->read_ctx_ = ConnectToRedis(host, port, password, &why);
    if (!store->read_ctx_) return why;
  }
  store->writer_ = std::thread([s = store.get()] { s->WriterLoop(); });
  return store;
}

RedisStateStore::RedisStateStore(std::string host, int port, std::string cluster,
                                 std::string password)
    : host_(std::move(host)),
      port_(port),
      cluster_(std::move(cluster)),
      password_(std::move(password)) {}

RedisStateStore::~RedisStateStore() {
  bool written = Flush(2000);
  {
    MutexLock lock(&mu_);
    stop_ = true;
    if (!written) {
      LOG_ERROR("Redis is unreachable: " + std::to_string(dirty_.size() + stream_adds_.size()) +
                " state writes are left unwritten at exit" +
                (resync_ ? " (and a full rewrite)" : ""));
    }
  }
  cv_.NotifyAll();
  if (writer_.joinable()) writer_.join();
  if (read_ctx_) redisFree(read_ctx_);
}

void RedisStateStore::MarkDirtyLocked(const std::string& table, const std::string& key,
                                      bool deleted, uint64_t gen) {
  // While a rewrite is due, it covers every record of the mirror and every deletion in a
  // table read with GetAll: only deletions elsewhere must be remembered one by one.
  if (resync_ && (!deleted || authoritative_.count(table))) return;
  uint64_t& g = dirty_[{table, key}];
  g = std::max(g, gen);  // the latest change supersedes older ones of the same record
}

std::vector<std::function<void()>> RedisStateStore::TakeSatisfiedLocked() {
  std::vector<std::function<void()>> out;
  // Until a rewrite is written, changes it covers are tracked nowhere else: hold back.
  if (resync_ || resync_in_flight_) return out;
  uint64_t oldest = in_flight_min_gen_;
  for (const auto& [key, gen] : dirty_) oldest = std::min(oldest, gen);
  for (const auto& [gen, cmd] : stream_adds_) oldest = std::min(oldest, gen);
  written_gen_ = std::max(written_gen_, oldest == UINT64_MAX ? gen_ : oldest - 1);
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->first <= written_gen_) {
      out.push_back(std::move(it->second));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

void RedisStateStore::RunSatisfied() {
  std::vector<std::function<void()>> done;
  {
    MutexLock lock(&mu_);
    if (waiters_.empty()) return;
    done = TakeSatisfiedLocked();
  }
  for (auto& fn : done) fn();
}

void RedisStateStore::WhenWritten(std::function<void()> done) {
  {
    MutexLock lock(&mu_);
    waiters_.emplace_back(gen_, std::move(done));
  }
  RunSatisfied();
}

void RedisStateStore::Put(const std::string& table, const std::string& key,
                          const std::string& json) {
  MutexLock lock(&mu_);
  mirror_[table][key] = json;
  MarkDirtyLocked(table, key, false, ++gen_);
  cv_.NotifyAll();
}

void RedisStateStore::Delete(const std::string& table, const std::string& key) {
  MutexLock lock(&mu_);
  auto t = mirror_.find(table);
  if (t != mirror_.end()) t->second.erase(key);
  MarkDirtyLocked(table, key, true, ++gen_);
  cv_.NotifyAll();
}

void RedisStateStore::Publish(const std::string& event_json) {
  MutexLock lock(&mu_);
  // Events are notifications (pub/sub keeps none either): a bounded queue, oldest dropped.
  if (events_.size() >= kMaxQueuedEvents) events_.pop_front();
  events_.push_back(event_json);
  cv_.NotifyAll();
}

void RedisStateStore::StreamAdd(const std::string& stream, int64_t seq, const StreamEntry& fields) {
  std::vector<std::string> cmd{
      "XADD",
      KeyFor(stream),
      "MAXLEN",
      "~",
      std::to_string(stream.rfind("logs", 0) == 0 || stream.rfind("job_logs:", 0) == 0
                         ? kMaxLogStreamLength
                         : kMaxStreamLength),
      std::to_string(seq < 0 ? 0 : seq) + "-1"};
  for (const auto& [f, v] : fields) {
    cmd.push_back(f);
    cmd.push_back(v);
  }
  MutexLock lock(&mu_);
  if (stream_adds_.size() >= kMaxQueuedStreamEntries) {
    LOG_ERROR("Redis has been unreachable for long: dropped the oldest unwritten stream entry");
    stream_adds_.pop_front();
  }
  stream_adds_.emplace_back(++gen_, std::move(cmd));
  cv_.NotifyAll();
}

void RedisStateStore::StreamDelete(const std::string& stream) {
  MutexLock lock(&mu_);
  stream_adds_.emplace_back(++gen_, std::vector<std::string>{"DEL", KeyFor(stream)});
  cv_.NotifyAll();
}

bool RedisStateStore::HasWorkLocked() const {
  return resync_ || !dirty_.empty() || !events_.empty() || !stream_adds_.empty();
}

bool RedisStateStore::Flush(int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  MutexLock lock(&mu_);
  bool timed_out = false;
  while (!((!HasWorkLocked() && !in_flight_) || stop_) && !timed_out)
    timed_out = !cv_.WaitUntil(&mu_, deadline);
  return ((!HasWorkLocked() && !in_flight_) || stop_) && !HasWorkLocked();
}

Result<std::map<std::string, std::string>> RedisStateStore::GetAll(const std::string& table) {
  std::map<std::string, std::string> out;
  MutexLock lock(&read_mu_);
  std::string address = host_ + ":" + std::to_string(port_);
  Status why = Status::Unavailable("no answer from Redis at " + address);
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!read_ctx_) read_ctx_ = ConnectToRedis(host_, port_, password_, &why);
    if (!read_ctx_) break;
    redisReply* r = RedisCommand(read_ctx_, {"HGETALL", KeyFor(table)});
    if (!r) {
      why = Status::Unavailable("lost the connection to Redis at " + address + ": " +
                                read_ctx_->errstr);
      redisFree(read_ctx_);
      read_ctx_ = nullptr;
      continue;
    }
    bool read = r->type == REDIS_REPLY_ARRAY;
    if (read) {
      for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply* k = r->element[i];
        const redisReply* v = r->element[i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
        out[std::string(k->str, k->len)] = std::string(v->str, v->len);
      }
    } else {
      why = Status::Unavailable(
          "Redis at " + address + " answered HGETALL with " +
          (r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : std::string("no table")));
    }
    freeReplyObject(r);
    if (!read) break;
    // The mirror now holds the whole table: a rewrite after an outage may remove from Redis
    // what the mirror lacks.
    MutexLock state_lock(&mu_);
    auto& mirrored = mirror_[table];
    for (const auto& [k, v] : out) mirrored.emplace(k, v);
    authoritative_.insert(table);
    return out;
  }
  return Status::Unavailable("cannot read table " + table +
                             " from the state store: " + why.message());
}

namespace {
// Sends `cmds` pipelined and reads every reply. False on a connection error or a reply that
// says Redis cannot take writes now (loading its data, a read-only replica): the caller
// reconnects and tries again later. `on_error(i, text)` sees the other error replies.
template <typename F>
bool Pipeline(redisContext* ctx, const std::vector<std::vector<std::string>>& cmds, F on_error) {
  for (const auto& cmd : cmds) {
    std::vector<const char*> ptrs;
    std::vector<size_t> lens;
    for (const auto& a : cmd) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx, int(cmd.size()), ptrs.data(), lens.data()) != REDIS_OK)
      return false;
  }
  bool ok = true;
  for (size_t i = 0; i < cmds.size(); ++i) {
    void* reply = nullptr;
    if (redisGetReply(ctx, &reply) != REDIS_OK) return false;
    auto* r = static_cast<redisReply*>(reply);
    if (r && r->type == REDIS_REPLY_ERROR) {
      std::string text(r->str, r->len);
      if (text.rfind("LOADING", 0) == 0 || text.rfind("READONLY", 0) == 0 ||
          text.rfind("BUSY", 0) == 0 || text.rfind("MASTERDOWN", 0) == 0 ||
          text.rfind("TRYAGAIN", 0) == 0) {
        ok = false;  // keep reading the replies so the connection stays in step
      } else {
        on_error(i, text);
      }
    }
    if (r) freeReplyObject(r);
  }
  return ok;
}

bool IsDuplicateStreamId(const std::string& error) {
  return error.find("equal or smaller than the target stream top item") != std::string::npos;
}
}  // namespace

metrics::Histogram RedisStateStore::WriteLatency() const {
  MutexLock lock(&latency_mu_);
  return latency_;
}

bool RedisStateStore::WriteBatch(redisContext* ctx) {
  std::vector<std::vector<std::string>> cmds;
  std::vector<std::pair<std::string, std::string>> keys;
  std::vector<uint64_t> gens;
  size_t streams = 0, events = 0;
  {
    MutexLock lock(&mu_);
    in_flight_min_gen_ = UINT64_MAX;
    while (!dirty_.empty() && keys.size() < kMaxBatch) {
      auto key = dirty_.begin()->first;
      in_flight_min_gen_ = std::min(in_flight_min_gen_, dirty_.begin()->second);
      gens.push_back(dirty_.begin()->second);
      dirty_.erase(dirty_.begin());
      auto t = mirror_.find(key.first);
      const std::string* value = nullptr;
      if (t != mirror_.end()) {
        auto v = t->second.find(key.second);
        if (v != t->second.end()) value = &v->second;
      }
      if (value) {
        cmds.push_back({"HSET", KeyFor(key.first), key.second, *value});
      } else {
        cmds.push_back({"HDEL", KeyFor(key.first), key.second});
      }
      keys.push_back(std::move(key));
    }
    for (; streams < stream_adds_.size() && streams < kMaxBatch; ++streams) {
      in_flight_min_gen_ = std::min(in_flight_min_gen_, stream_adds_[streams].first);
      cmds.push_back(stream_adds_[streams].second);
    }
    // Events go once: popped before sending, never resent. Only once every dirty record is
    // in the batch, so an event never overtakes the write of the record it announces.
    for (; dirty_.empty() && !events_.empty() && events < kMaxBatch; ++events) {
      cmds.push_back({"PUBLISH", KeyFor("events"), std::move(events_.front())});
      events_.pop_front();
    }
    in_flight_ = true;
  }
  size_t first_stream = keys.size();
  auto sent = std::chrono::steady_clock::now();
  bool ok = Pipeline(ctx, cmds, [&](size_t i, const std::string& error) {
    if (i >= first_stream && i < first_stream + streams && IsDuplicateStreamId(error))
      return;  // resent entry
    LOG_WARN("Redis refused a write: " + error);
  });
  if (ok && !cmds.empty()) {
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - sent;
    MutexLock lock(&latency_mu_);
    latency_.Observe(took.count());
  }
  std::vector<std::function<void()>> done;
  {
    MutexLock lock(&mu_);
    in_flight_ = false;
    in_flight_min_gen_ = UINT64_MAX;
    if (ok) {
      stream_adds_.erase(stream_adds_.begin(), stream_adds_.begin() + long(streams));
    } else {
      resync_ = true;
      for (size_t i = 0; i < keys.size(); ++i) {
        auto t = mirror_.find(keys[i].first);
        MarkDirtyLocked(keys[i].first, keys[i].second,
                        t == mirror_.end() || !t->second.count(keys[i].second), gens[i]);
      }
    }
    if (!waiters_.empty()) done = TakeSatisfiedLocked();
    cv_.NotifyAll();
  }
  for (auto& fn : done) fn();
  return ok;
}

bool RedisStateStore::Resync(redisContext* ctx) {
  std::map<std::string, std::map<std::string, std::string>> snapshot;
  std::set<std::string> authoritative;
  {
    MutexLock lock(&mu_);
    snapshot = mirror_;
    authoritative = authoritative_;
    resync_ = false;
    resync_in_flight_ = true;
    in_flight_ = true;
    // What the rewrite covers is no longer dirty; later changes mark their records again.
    for (auto it = dirty_.begin(); it != dirty_.end();) {
      const auto& [table, key] = it->first;
      auto t = mirror_.find(table);
      bool present = t != mirror_.end() && t->second.count(key);
      it = present || authoritative_.count(table) ? dirty_.erase(it) : std::next(it);
    }
  }
  bool ok = true;
  size_t written = 0;
  auto log_error = [](size_t, const std::string& e) { LOG_WARN("Redis refused a write: " + e); };
  for (const auto& table : authoritative) {
    if (!ok) break;
    // Fields this store no longer has (deleted while Redis was away, or older than a
    // snapshot Redis restarted from) go.
    redisReply* r = RedisCommand(ctx, {"HKEYS", KeyFor(table)});
    if (!r || r->type != REDIS_REPLY_ARRAY) {
      if (r) freeReplyObject(r);
      ok = false;
      break;
    }
    std::vector<std::vector<std::string>> dels;
    const auto& have = snapshot[table];
    for (size_t i = 0; i < r->elements; ++i) {
      std::string field(r->element[i]->str, r->element[i]->len);
      if (!have.count(field)) dels.push_back({"HDEL", KeyFor(table), std::move(field)});
    }
    freeReplyObject(r);
    for (size_t i = 0; ok && i < dels.size(); i += kMaxBatch) {
      std::vector<std::vector<std::string>> chunk(
          dels.begin() + long(i), dels.begin() + long(std::min(dels.size(), i + kMaxBatch)));
      ok = Pipeline(ctx, chunk, log_error);
    }
  }
  for (auto t = snapshot.begin(); ok && t != snapshot.end(); ++t) {
    std::vector<std::vector<std::string>> chunk;
    for (auto f = t->second.begin(); ok && f != t->second.end(); ++f) {
      chunk.push_back({"HSET", KeyFor(t->first), f->first, f->second});
      ++written;
      if (chunk.size() == kMaxBatch) {
        ok = Pipeline(ctx, chunk, log_error);
        chunk.clear();
      }
    }
    if (ok && !chunk.empty()) ok = Pipeline(ctx, chunk, log_error);
  }
  std::vector<std::function<void()>> done;
  {
    MutexLock lock(&mu_);
    in_flight_ = false;
    resync_in_flight_ = false;
    if (ok) {
      LOG_INFO("rewrote " + std::to_string(written) +
               " records to Redis after the connection came back");
    } else {
      resync_ = true;
    }
    if (!waiters_.empty()) done = TakeSatisfiedLocked();
    cv_.NotifyAll();
  }
  for (auto& fn : done) fn();
  return ok;
}

void RedisStateStore::WriterLoop() {
  redisContext* ctx = nullptr;
  int backoff_ms = 50;
  bool warned = false;
  Status why;  // why the last connect failed
  while (true) {
    bool stopping;
    {
      MutexLock lock(&mu_);
      while (!(stop_ || HasWorkLocked())) cv_.Wait(&mu_);
      stopping = stop_;
      if (stopping && !HasWorkLocked()) break;
    }
    if (!ctx) ctx = ConnectToRedis(host_, port_, password_, &why);
    bool ok = ctx != nullptr;
    if (ok) {
      bool resync;
      {
        MutexLock lock(&mu_);
        resync = resync_;
      }
      ok = resync ? Resync(ctx) : WriteBatch(ctx);
    }
    if (ok) {
      if (warned) LOG_INFO("the Redis connection is back");
      warned = false;
      backoff_ms = 50;
      continue;
    }
    {
      MutexLock lock(&mu_);
      resync_ = true;  // Redis may have lost what it had: rewrite everything once it is back
    }
    if (ctx) redisFree(ctx);
    ctx = nullptr;
    if (stopping) break;  // the destructor already waited its bounded time
    if (!warned) {
      LOG_WARN("lost the Redis connection; reconnecting (no state write is dropped)" +
               (why.ok() ? std::string() : ": " + why.message()));
    }
    why = Status::Ok();
    warned = true;
    {
      // Backoff; stop wakes it.
      auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(backoff_ms);
      MutexLock lock(&mu_);
      while (!stop_ && cv_.WaitUntil(&mu_, deadline)) {
      }
    }
    backoff_ms = std::min(backoff_ms * 2, 1000);
  }
  if (ctx) redisFree(ctx);
}

}  // namespace orrery
