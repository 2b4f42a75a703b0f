// `orrery status` and `orrery list`: what the cluster looks like, from the head (nodes) and
// from the state store in Redis (actors, placement groups, jobs).
#pragma once

#include <string>

namespace orrery::cli {

struct InspectFlags {
  std::string address;              // head host:port
  std::string redis_address;        // host:port
  std::string redis_password_file;  // as given (--redis-password-file)
  std::string redis_password;       // what the CLI found (RedisPasswordFor); "" for none
  bool json = false;
};

int Status(const InspectFlags& flags);
int List(const std::string& what, const InspectFlags& flags);

}  // namespace orrery::cli
