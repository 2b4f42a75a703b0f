#include "cli/src/log_reader.h"

#include <hiredis/hiredis.h>

#include "core/internal/redis_connection.h"
#include "core/internal/text.h"

namespace orrery::cli {

Result<std::unique_ptr<RedisReader>> RedisReader::Connect(const std::string& address,
                                                          const std::string& password,
                                                          const std::string& cluster) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos)
    return orrery::Status::InvalidArgument("Redis address is not host:port");
  orrery::Status why;
  redisContext* c = ConnectToRedis(address.substr(0, colon), std::atoi(address.c_str() + colon + 1),
                                   password, &why);
  if (!c) return why;
  return std::unique_ptr<RedisReader>(new RedisReader(c, cluster));
}

RedisReader::~RedisReader() {
  if (c_) redisFree(c_);
}

Result<std::vector<LogEntry>> RedisReader::Read(const std::string& name, const std::string& after,
                                                int count, int block_ms) {
  std::vector<std::string> cmd{"XREAD", "COUNT", std::to_string(count)};
  if (block_ms > 0) {
    cmd.push_back("BLOCK");
    cmd.push_back(std::to_string(block_ms));
  }
  cmd.push_back("STREAMS");
  cmd.push_back("orrery:" + cluster_ + ":" + name);
  cmd.push_back(after);
  redisReply* r = RedisCommand(c_, cmd);
  if (!r) return orrery::Status::Unavailable("Redis connection lost");
  std::vector<LogEntry> out;
  orrery::Status bad = orrery::Status::Ok();
  if (r->type == REDIS_REPLY_ERROR) {
    bad = orrery::Status::Internal(std::string("Redis: ") + r->str);
  } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
             r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements == 2) {
    redisReply* entries = r->element[0]->element[1];
    for (size_t i = 0; entries->type == REDIS_REPLY_ARRAY && i < entries->elements; ++i) {
      redisReply* e = entries->element[i];
      if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
          e->element[0]->type != REDIS_REPLY_STRING)
        continue;
      LogEntry entry;
      entry.id.assign(e->element[0]->str, e->element[0]->len);
      redisReply* kv = e->element[1];
      for (size_t k = 0; kv->type == REDIS_REPLY_ARRAY && k + 1 < kv->elements; k += 2) {
        if (kv->element[k]->type != REDIS_REPLY_STRING ||
            kv->element[k + 1]->type != REDIS_REPLY_STRING)
          continue;
        entry.fields[std::string(kv->element[k]->str, kv->element[k]->len)] =
            std::string(kv->element[k + 1]->str, kv->element[k + 1]->len);
      }
      out.push_back(std::move(entry));
    }
  }
  freeReplyObject(r);
  if (!bad.ok()) return bad;
  return out;
}

Result<std::string> RedisReader::Record(const std::string& table, const std::string& key) {
  redisReply* r = RedisCommand(c_, {"HGET", "orrery:" + cluster_ + ":" + table, key});
  if (!r) return orrery::Status::Unavailable("Redis connection lost");
  Result<std::string> out = orrery::Status::NotFound(key);
  if (r->type == REDIS_REPLY_STRING) out = std::string(r->str, r->len);
  if (r->type == REDIS_REPLY_ERROR) out = orrery::Status::Internal(std::string("Redis: ") + r->str);
  freeReplyObject(r);
  return out;
}

std::string FormatLogEntry(const LogEntry& e, bool with_prefix) {
  auto field = [&](const char* k) {
    auto it = e.fields.find(k);
    return it == e.fields.end() ? std::string() : it->second;
  };
  std::string prefix;
  if (with_prefix) {
    prefix = "(" + text::EscapeControl(field("name").substr(0, 128)) +
             " pid=" + text::EscapeControl(field("pid").substr(0, 12)) +
             ", node=" + text::EscapeControl(field("node").substr(0, 6)) + ") ";
  }
  std::string out, t = field("text");
  size_t start = 0;
  while (start <= t.size()) {
    size_t nl = t.find('\n', start);
    if (nl == std::string::npos) nl = t.size();
    out += prefix + text::EscapeControl(std::string_view(t).substr(start, nl - start)) + "\n";
    start = nl + 1;
  }
  return out;
}

}  // namespace orrery::cli
