#include "actors/src/working_dirs.h"

#include "actors/src/errors_util.h"
#include "core/internal/folder_pack.h"
#include "core/internal/log.h"
#include "orrery/errors.h"

namespace orrery::runtime {

WorkingDirs::Package WorkingDirs::Ship(const std::string& dir, const std::string& what) {
  MutexLock lock(&mu_);
  Result<std::string> fingerprint = folder_pack::Fingerprint(dir);
  if (!fingerprint.ok())
    throw ConfigError(what + ": runtime env: " + fingerprint.status().message());
  auto known = shipped_.find(dir);
  if (known != shipped_.end() && known->second.fingerprint == fingerprint.value())
    return known->second.package;
  Result<folder_pack::Packed> packed = folder_pack::Pack(dir);
  if (!packed.ok()) throw ConfigError(what + ": runtime env: " + packed.status().message());
  proto::BinaryMsg put{0, "", packed.value().hash, "", true, ""};
  put.package = true;
  proto::AckMsg ack = head_.PutBinary(put, packed.value().bytes);
  if (!ack.ok)
    ThrowKind(ack.error_kind,
              what + ": the head could not store the working_dir '" + dir + "': " + ack.message);
  if (packed.value().skipped > 0)
    LOG_WARN("working_dir " + dir + ": " + std::to_string(packed.value().skipped) +
             " link(s) or special file(s) left out of its package");
  Package package{packed.value().hash, folder_pack::FolderIdentity(dir)};
  if (shipped_.size() >= kMaxFolders && known == shipped_.end()) shipped_.clear();
  shipped_[dir] = Shipped{fingerprint.value(), package};
  return package;
}

}  // namespace orrery::runtime
