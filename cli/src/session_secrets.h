// The secrets of a session that `orrery start` writes into its directory (mode 0600): the
// cluster token (docs/security.md) and the Redis password (docs/redis-schema.md "Password").
#pragma once

#include <string>

#include "cli/src/daemons.h"
#include "cli/src/session.h"
#include "orrery/status.h"

namespace orrery::cli {

// Writes <session dir>/token: the token given (flags.token_file, $ORRERY_TOKEN_FILE), else
// for a head (`join_address` empty) a new random one, or the one of this host's live session
// of `restarted_head` when a head starts again where it ran; for a node joining
// `join_address`, the token of this host's session of that head. With flags.insecure, records
// "insecure" in the session instead. PermissionDenied when a joining node has no token.
Status WriteSessionToken(Session& s, const CredentialFlags& flags, const std::string& join_address,
                         const std::string& restarted_head = "");

// Writes <session dir>/redis_password: the password in `file` (else $ORRERY_REDIS_PASSWORD_FILE,
// or for an external Redis the file of this host's session that uses it), else for a Redis
// started here (`external_redis` empty) a new random one; records it as the session's
// "redis_password_file". An external Redis without a password leaves no file. Returns the
// password.
Result<std::string> WriteSessionRedisPassword(Session& s, const std::string& file,
                                              const std::string& external_redis);

}  // namespace orrery::cli
