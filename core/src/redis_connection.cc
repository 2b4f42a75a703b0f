// Connecting and authenticating to Redis, and running one command (docs/redis-schema.md
// "Password").
#include "core/internal/redis_connection.h"

#include <hiredis/hiredis.h>

#include <cstdlib>

#include "core/internal/redis_store.h"
#include "core/internal/security.h"

namespace orrery {

// Connects and authenticates (AuthenticateRedis); null with `why` set when either fails.
redisContext* ConnectToRedis(const std::string& host, int port, const std::string& password,
                             Status* why) {
  std::string address = host + ":" + std::to_string(port);
  timeval tv{2, 0};
  redisContext* c = redisConnectWithTimeout(host.c_str(), port, tv);
  if (!c || c->err) {
    *why = Status::Unavailable("cannot connect to Redis at " + address +
                               (c ? std::string(": ") + c->errstr : ""));
    if (c) redisFree(c);
    return nullptr;
  }
  // A Redis that hangs (stopped, or swapping) must not block the writer for ever: a reply
  // slower than this counts as a lost connection, and the writer reconnects and resyncs.
  timeval reply_timeout{10, 0};
  redisSetTimeout(c, reply_timeout);
  if (Status s = AuthenticateRedis(c, password, address); !s.ok()) {
    *why = s;
    redisFree(c);
    return nullptr;
  }
  return c;
}

// Runs one command; returns the reply (caller frees) or null on a connection error.
redisReply* RedisCommand(redisContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  return static_cast<redisReply*>(redisCommandArgv(c, int(argv.size()), ptrs.data(), lens.data()));
}

Result<std::string> ReadRedisPassword(const std::string& file) {
  std::string path = file;
  if (path.empty()) {
    const char* env = std::getenv("ORRERY_REDIS_PASSWORD_FILE");
    if (env && *env) path = env;
  }
  if (path.empty()) return std::string();
  return security::ReadSecretFile(path);
}

Status AuthenticateRedis(redisContext* c, const std::string& password, const std::string& address) {
  // With a password: AUTH. Without one: PING, which a Redis that wants a password refuses
  // with NOAUTH, so the caller learns it now rather than at its first write.
  redisReply* r =
      password.empty() ? RedisCommand(c, {"PING"}) : RedisCommand(c, {"AUTH", password});
  if (!r) {
    return Status::Unavailable("lost the connection to Redis at " + address + ": " +
                               (c->err ? c->errstr : "no reply"));
  }
  std::string error = r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "";
  freeReplyObject(r);
  if (error.empty()) return Status::Ok();
  // Redis's answers never contain the password; it stays out of every message.
  if (error.rfind("NOAUTH", 0) == 0) {
    return Status::PermissionDenied(
        "Redis at " + address + " requires a password (" + error +
        "): pass --redis-password-file F or set ORRERY_REDIS_PASSWORD_FILE");
  }
  if (error.rfind("WRONGPASS", 0) == 0 || error.find("invalid password") != std::string::npos) {
    return Status::PermissionDenied("Redis at " + address + " refused the password (" + error +
                                    ")");
  }
  if (!password.empty() && error.find("without any password configured") != std::string::npos) {
    return Status::PermissionDenied(
        "Redis at " + address +
        " has no password set, but one was given: set requirepass on that Redis "
        "or give no --redis-password-file (" +
        error + ")");
  }
  return Status::Unavailable("Redis at " + address + " refused " +
                             (password.empty() ? "PING" : "AUTH") + " (" + error + ")");
}

}  // namespace orrery
