// Connecting and authenticating to Redis (AuthenticateRedis, redis_store.h), and running one
// command: what the state store's reader and writer share.
#pragma once

#include <string>
#include <vector>

#include "orrery/status.h"

struct redisContext;
struct redisReply;

namespace orrery {

// Connects and authenticates; null with `why` set when either fails.
redisContext* ConnectToRedis(const std::string& host, int port, const std::string& password,
                             Status* why);
// Runs one command; returns the reply (the caller frees it) or null on a connection error.
redisReply* RedisCommand(redisContext* c, const std::vector<std::string>& argv);

}  // namespace orrery
