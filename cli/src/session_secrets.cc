#include "cli/src/session_secrets.h"

#include <cstdlib>
#include <filesystem>

#include "core/internal/security.h"

namespace orrery::cli {

Status WriteSessionToken(Session& s, const CredentialFlags& flags, const std::string& join_address,
                         const std::string& restarted_head) {
  if (flags.insecure) {
    s.values["insecure"] = "1";
    return Status::Ok();
  }
  std::string file = flags.token_file;
  if (file.empty()) {
    const char* env = std::getenv("ORRERY_TOKEN_FILE");
    if (env && *env) file = env;
  }
  if (file.empty() && !join_address.empty()) file = security::FindSessionTokenFile(join_address);
  if (file.empty() && join_address.empty() && !restarted_head.empty()) {
    // A head started again where it ran: this host's node of that head still runs and holds
    // the old token, so the cluster keeps it.
    for (auto& live : StartedSessions()) {
      if (live.values["head_address"] == restarted_head && !live.values.count("insecure")) {
        std::error_code ec;
        if (std::filesystem::exists(live.dir + "/token", ec)) file = live.dir + "/token";
      }
    }
  }
  std::string token;
  if (!file.empty()) {
    auto t = security::ReadTokenFile(file);
    if (!t.ok()) return t.status();
    token = t.value();
  } else if (join_address.empty()) {
    token = security::NewToken();
  } else {
    return Status::PermissionDenied(
        "no cluster token for " + join_address +
        ": copy the head's <session dir>/token to this host (mode 0600) and pass "
        "--token-file F (or set ORRERY_TOKEN_FILE)");
  }
  return security::WriteSecretFile(s.dir + "/token", token);
}

Result<std::string> WriteSessionRedisPassword(Session& s, const std::string& file,
                                              const std::string& external_redis) {
  auto given = RedisPasswordFor(file, external_redis);
  if (!given.ok()) return given.status();
  std::string password = given.value();
  if (password.empty() && external_redis.empty()) password = security::NewToken();
  if (password.empty()) return password;
  std::string path = s.dir + "/redis_password";
  if (Status w = security::WriteSecretFile(path, password); !w.ok()) return w;
  s.values["redis_password_file"] = path;
  return password;
}

}  // namespace orrery::cli
