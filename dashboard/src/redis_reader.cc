#include "dashboard/src/redis_reader.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "core/internal/redis_store.h"

namespace orrery::dashboard {

void RedisReader::ReplyFree::operator()(redisReply* r) const {
  if (r) freeReplyObject(r);
}

RedisReader::RedisReader(std::string address, std::string cluster, int timeout_ms,
                         std::string password)
    : address_(std::move(address)),
      cluster_(std::move(cluster)),
      timeout_ms_(timeout_ms),
      password_(std::move(password)) {
  std::string a = address_.rfind("redis://", 0) == 0 ? address_.substr(8) : address_;
  size_t colon = a.rfind(':');
  char* end = nullptr;
  long port = colon == std::string::npos ? 0 : std::strtol(a.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || colon == 0 || end == nullptr || *end != '\0' || port <= 0 ||
      port > 65535) {
    parse_status_ =
        Status::InvalidArgument("Redis address must be host:port, got '" + address_ + "'");
    return;
  }
  host_ = a.substr(0, colon);
  port_ = int(port);
}

RedisReader::~RedisReader() { Drop(); }

void RedisReader::Drop() {
  if (ctx_) redisFree(ctx_);
  ctx_ = nullptr;
}

Status RedisReader::EnsureConnected() {
  if (!parse_status_.ok()) return parse_status_;
  if (ctx_) return Status::Ok();
  timeval tv{timeout_ms_ / 1000, (timeout_ms_ % 1000) * 1000};
  redisContext* c = redisConnectWithTimeout(host_.c_str(), port_, tv);
  if (!c) return Status::Unavailable("cannot connect to Redis at " + address_ + ": out of memory");
  if (c->err) {
    std::string why = c->errstr;
    redisFree(c);
    return Status::Unavailable("cannot connect to Redis at " + address_ + ": " + why);
  }
  if (redisSetTimeout(c, tv) != REDIS_OK) {
    redisFree(c);
    return Status::Unavailable("cannot set a timeout on the connection to Redis at " + address_);
  }
  // Every connection authenticates (a Redis without a password: the PING of AuthenticateRedis).
  if (Status s = AuthenticateRedis(c, password_, address_); !s.ok()) {
    redisFree(c);
    return s;
  }
  ctx_ = c;
  return Status::Ok();
}

Result<RedisReader::Reply> RedisReader::Command(const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  // A kept connection may have gone stale (Redis restarted): one retry on a fresh one.
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool fresh = ctx_ == nullptr;
    if (Status s = EnsureConnected(); !s.ok()) return s;
    Reply r(static_cast<redisReply*>(
        redisCommandArgv(ctx_, int(argv.size()), ptrs.data(), lens.data())));
    if (!r) {
      bool timed_out = ctx_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
      std::string why = ctx_->err ? ctx_->errstr : "no reply";
      Drop();
      if (timed_out)
        return Status::Timeout("Redis at " + address_ + " did not answer " + argv[0] + " in time");
      if (!fresh) continue;
      return Status::Unavailable("lost the connection to Redis at " + address_ + ": " + why);
    }
    if (r->type == REDIS_REPLY_ERROR)
      return Status::Internal("Redis at " + address_ + " refused " + argv[0] + ": " + r->str);
    return r;
  }
  return Status::Unavailable("lost the connection to Redis at " + address_);
}

Status RedisReader::Ping() {
  MutexLock lock(&mu_);
  auto r = Command({"PING"});
  return r.ok() ? Status::Ok() : r.status();
}

namespace {
bool IsString(const redisReply* r) {
  return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) && r->str;
}
std::string Str(const redisReply* r) {
  return IsString(r) ? std::string(r->str, r->len) : std::string();
}
}  // namespace

Result<Table> RedisReader::GetTable(const std::string& table) {
  MutexLock lock(&mu_);
  auto r = Command({"HGETALL", Key(table)});
  if (!r.ok()) return r.status();
  const redisReply* reply = r->get();
  Table out;
  if (reply->type != REDIS_REPLY_ARRAY) {
    return Status::Internal("HGETALL " + Key(table) + " did not answer an array");
  }
  for (size_t i = 0; i + 1 < reply->elements; i += 2) {
    out[Str(reply->element[i])] = Str(reply->element[i + 1]);
  }
  return out;
}

Result<std::string> RedisReader::GetRecord(const std::string& table, const std::string& id) {
  MutexLock lock(&mu_);
  auto r = Command({"HGET", Key(table), id});
  if (!r.ok()) return r.status();
  if ((*r)->type == REDIS_REPLY_NIL) return Status::NotFound("no " + table + " record " + id);
  if (!IsString(r->get()))
    return Status::Internal("HGET " + Key(table) + " did not answer a string");
  return Str(r->get());
}

Result<std::vector<StreamEntry>> RedisReader::RunMetrics(const std::string& run_id,
                                                         size_t max_entries) {
  return Range({"XRANGE", Key("train:" + run_id + ":metrics"), "-", "+", "COUNT",
                std::to_string(max_entries)});
}

Result<std::vector<StreamEntry>> RedisReader::LastEntries(const std::string& stream,
                                                          size_t max_entries) {
  auto r = Range({"XREVRANGE", Key(stream), "+", "-", "COUNT", std::to_string(max_entries)});
  if (r.ok()) std::reverse(r->begin(), r->end());
  return r;
}

Result<std::vector<StreamEntry>> RedisReader::Range(const std::vector<std::string>& command) {
  MutexLock lock(&mu_);
  auto r = Command(command);
  if (!r.ok()) return r.status();
  const redisReply* reply = r->get();
  if (reply->type != REDIS_REPLY_ARRAY)
    return Status::Internal(command[0] + " did not answer an array");
  std::vector<StreamEntry> out;
  out.reserve(reply->elements);
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* e = reply->element[i];
    // Each entry is [id, [field, value, ...]]; anything else is skipped.
    if (!e || e->type != REDIS_REPLY_ARRAY || e->elements != 2) continue;
    const redisReply* kv = e->element[1];
    if (!kv || (kv->type != REDIS_REPLY_ARRAY)) continue;
    StreamEntry entry;
    entry.id = Str(e->element[0]);
    for (size_t j = 0; j + 1 < kv->elements; j += 2) {
      entry.fields.emplace_back(Str(kv->element[j]), Str(kv->element[j + 1]));
    }
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace orrery::dashboard
