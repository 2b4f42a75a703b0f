#include "core/internal/runtime_env.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/internal/file_hash.h"
#include "core/internal/folder_pack.h"

namespace orrery::runtime_env {

Status Check(const proto::RuntimeEnvMsg& env) {
  if (env.env_vars.size() > kMaxVars) {
    return Status::InvalidArgument("runtime env: " + std::to_string(env.env_vars.size()) +
                                   " variables (at most " + std::to_string(kMaxVars) + ")");
  }
  size_t bytes = 0;
  for (const auto& [name, value] : env.env_vars) {
    bytes += name.size() + value.size();
    if (name.empty()) return Status::InvalidArgument("runtime env: a variable with no name");
    if (name.find('=') != std::string::npos || name.find('\0') != std::string::npos) {
      return Status::InvalidArgument("runtime env: the variable name '" + name +
                                     "' holds '=' or a NUL byte");
    }
    if (name.rfind("ORRERY_", 0) == 0) {
      return Status::InvalidArgument("runtime env: '" + name +
                                     "' is one of the runtime's own variables (ORRERY_*)");
    }
    if (value.find('\0') != std::string::npos) {
      return Status::InvalidArgument("runtime env: the value of '" + name + "' holds a NUL byte");
    }
  }
  if (bytes > kMaxBytes) {
    return Status::InvalidArgument("runtime env: " + std::to_string(bytes) +
                                   " bytes of variables (at most " + std::to_string(kMaxBytes) +
                                   ")");
  }
  const std::string& dir = env.working_dir;
  if (dir.find('\0') != std::string::npos) {
    return Status::InvalidArgument("runtime env: working_dir holds a NUL byte");
  }
  if (!dir.empty() && dir[0] != '/') {
    return Status::InvalidArgument("runtime env: working_dir '" + dir + "' is not absolute");
  }
  if (!env.working_dir_hash.empty() && (dir.empty() || !IsContentHash(env.working_dir_hash))) {
    return Status::InvalidArgument(
        "runtime env: a working_dir package is named by a SHA-256 (64 lowercase hex "
        "characters) and needs its working_dir");
  }
  if (env.working_dir_id.size() > 128)
    return Status::InvalidArgument("runtime env: a working_dir identity over 128 bytes");
  return Status::Ok();
}

bool InPlace(const proto::RuntimeEnvMsg& env) {
  if (env.working_dir_hash.empty()) return true;
  return !env.working_dir_id.empty() &&
         folder_pack::FolderIdentity(env.working_dir) == env.working_dir_id;
}

std::string FolderProblem(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "'" + path + "': " + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return "'" + path + "' is not a folder";
  if (access(path.c_str(), X_OK) != 0) return "'" + path + "': " + std::strerror(errno);
  return "";
}

Result<std::string> LocalFolder(const std::string& dir) {
  std::error_code ec;
  auto absolute = std::filesystem::absolute(dir, ec);
  if (ec) return Status::InvalidArgument("'" + dir + "': " + ec.message());
  std::string out = absolute.lexically_normal().string();
  if (std::string problem = FolderProblem(out); !problem.empty())
    return Status::InvalidArgument(problem);
  return out;
}

}  // namespace orrery::runtime_env
