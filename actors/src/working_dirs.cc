#include "actors/src/working_dirs.h"

#include <optional>

#include "actors/src/errors_util.h"
#include "core/internal/clock.h"
#include "core/internal/folder_pack.h"
#include "core/internal/log.h"
#include "orrery/errors.h"

namespace orrery::runtime {

WorkingDirs::Package WorkingDirs::Ship(const std::string& dir, const std::string& what) {
  // Not under the lock: two threads may pack the same folder at once (the head keeps one
  // copy), but none waits for another's upload.
  Result<folder_pack::Scan> scan = folder_pack::Fingerprint(dir);
  if (!scan.ok()) throw ConfigError(what + ": runtime env: " + scan.status().message());
  if (scan.value().too_big) {
    // As before packages: the folder must be at that path on every node (a shared file
    // system), where it is used in place.
    LOG_WARN("working_dir " + dir + " is over " +
             std::to_string(folder_pack::kMaxPackageBytes >> 20) + " MiB, " +
             std::to_string(folder_pack::kMaxEntries) + " entries or " +
             std::to_string(folder_pack::kMaxDepth) +
             " folders deep: not shipped; nodes must see it at that path");
    return Package{};
  }
  std::optional<Package> kept;  // shipped before, unchanged: the head may still keep it
  {
    MutexLock lock(&mu_);
    auto known = shipped_.find(dir);
    if (known != shipped_.end() && known->second.fingerprint == scan.value().digest) {
      if (MonotonicSeconds() - known->second.checked_at < kRecheckS) return known->second.package;
      kept = known->second.package;
    }
  }
  if (kept) {
    // The head forgets the packages used longest ago: asked (no bytes) whether it still
    // keeps this one, and sent it again only when it does not.
    proto::BinaryMsg ask{0, "", kept->hash, "", true, ""};
    ask.package = true;
    proto::AckMsg ack = head_.PutBinary(ask, "");
    if (ack.ok) {
      MutexLock lock(&mu_);
      shipped_[dir] = Shipped{scan.value().digest, *kept, MonotonicSeconds()};
      return *kept;
    }
    if (ack.error_kind != proto::ErrorKind::kNeedBinary)
      ThrowKind(ack.error_kind,
                what + ": the head could not store the working_dir '" + dir + "': " + ack.message);
  }
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
  MutexLock lock(&mu_);
  if (shipped_.size() >= kMaxFolders && !shipped_.count(dir)) shipped_.clear();
  shipped_[dir] = Shipped{scan.value().digest, package, MonotonicSeconds()};
  return package;
}

}  // namespace orrery::runtime
