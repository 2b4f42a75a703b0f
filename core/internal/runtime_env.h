// Checks of a worker's runtime environment (orrery::RuntimeEnv, docs/api.md "Runtime
// environments"): the submitter checks what its user gave, and the node checks again what a
// peer sent before it starts a worker with it.
#pragma once

#include <string>

#include "core/internal/protocol_head.h"
#include "orrery/runtime_env.h"
#include "orrery/status.h"

namespace orrery::runtime_env {

inline constexpr size_t kMaxVars = 1024;
// Names and values together: well inside one request to a zygote (a SOCK_SEQPACKET message,
// bounded by the socket's send buffer, about 208 KiB by default).
inline constexpr size_t kMaxBytes = 64 << 10;
// The worker reads it, changes into the folder it names, and removes it.
inline constexpr char kWorkingDirVar[] = "ORRERY_WORKING_DIR";

// InvalidArgument, naming the first problem, unless: every variable name is non-empty, holds
// no '=' or NUL and does not start with "ORRERY_" (the runtime's own variables); no value
// holds a NUL; there are at most kMaxVars variables of at most kMaxBytes in all; and
// working_dir is empty or an absolute path without NUL, with a package hash (when given)
// that is a SHA-256 and a folder identity of at most 128 bytes.
Status Check(const proto::RuntimeEnvMsg& env);

// The wire form of a RuntimeEnv, with its working_dir's package when it has one (a submitter
// in a cluster packs it).
inline proto::RuntimeEnvMsg MsgOf(const RuntimeEnv& env, std::string working_dir_hash = {},
                                  std::string working_dir_id = {}) {
  return proto::RuntimeEnvMsg{env.env_vars, env.working_dir, std::move(working_dir_hash),
                              std::move(working_dir_id)};
}

// Whether a worker with `env` starts in env.working_dir itself on this host: it names no
// package, or this host sees the very folder that was packed (folder_pack::FolderIdentity).
// Otherwise it starts in this node's copy of the package.
bool InPlace(const proto::RuntimeEnvMsg& env);

// Whether `path` is a folder on this host (following links) that this process may enter;
// an error message otherwise.
std::string FolderProblem(const std::string& path);

// `dir` as a worker gets it: made absolute (against this process's working folder) and
// normal, and a folder on this host that this process may enter; InvalidArgument naming the
// problem otherwise.
Result<std::string> LocalFolder(const std::string& dir);

}  // namespace orrery::runtime_env
