#include "actors/src/working_dirs.h"

#include <optional>

#include "actors/src/errors_util.h"
#include "core/internal/clock.h"
#include "core/internal/folder_pack.h"
#include "core/internal/log.h"
#include "orrery/errors.h"

namespace orrery::runtime {

WorkingDirs::Package WorkingDirs::Ship(const std::string& dir, const std::string& what,
                                       bool snapshot) {
  // Not under the lock while it scans, packs or asks the head: two threads may pack the same
  // folder at once (the head keeps one copy), but none waits for another's upload.
  double now = MonotonicSeconds();
  std::optional<Shipped> known;
  {
    MutexLock lock(&mu_);
    if (auto it = shipped_.find(dir); it != shipped_.end()) known = it->second;
  }
  bool rescan = !known || (!snapshot && now - known->scanned_at >= kRescanS);
  // The path of most submissions: looked at and asked about lately, nothing to remember.
  if (!rescan && (known->package.hash.empty() || now - known->checked_at < kRecheckS))
    return known->package;
  if (rescan) {
    Result<folder_pack::Scan> scan = folder_pack::Fingerprint(dir);
    if (!scan.ok()) throw ConfigError(what + ": runtime env: " + scan.status().message());
    if (scan.value().too_big) {
      // As before packages: nodes must see the folder at that path (a shared file system).
      if (!known || !known->package.hash.empty())
        LOG_WARN("working_dir " + dir + " is over " +
                 std::to_string(folder_pack::kMaxPackageBytes >> 20) + " MiB, " +
                 std::to_string(folder_pack::kMaxEntries) + " entries or " +
                 std::to_string(folder_pack::kMaxDepth) +
                 " folders deep: not shipped; nodes must see it at that path");
      return Remember(dir, Shipped{scan.value().digest, Package{}, now, now});
    }
    if (known && known->fingerprint != scan.value().digest) known.reset();  // changed
    if (known) known->scanned_at = now;
    if (!known) return Upload(dir, what, scan.value().digest, now);
  }
  if (known->package.hash.empty() || now - known->checked_at < kRecheckS)
    return Remember(dir, *known);
  // The head forgets the packages used longest ago: asked (no bytes) whether it still keeps
  // this one, and sent it again only when it does not.
  proto::BinaryMsg ask{0, "", known->package.hash, "", true, ""};
  ask.package = true;
  proto::AckMsg ack = head_.PutBinary(ask, "");
  if (ack.ok) {
    known->checked_at = now;
    return Remember(dir, *known);
  }
  if (ack.error_kind != proto::ErrorKind::kNeedBinary)
    ThrowKind(ack.error_kind,
              what + ": the head could not store the working_dir '" + dir + "': " + ack.message);
  return Upload(dir, what, known->fingerprint, now);
}

WorkingDirs::Package WorkingDirs::Upload(const std::string& dir, const std::string& what,
                                         const std::string& fingerprint, double now) {
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
  return Remember(
      dir, Shipped{fingerprint, Package{packed.value().hash, folder_pack::FolderIdentity(dir)}, now,
                   now});
}

WorkingDirs::Package WorkingDirs::Remember(const std::string& dir, const Shipped& shipped) {
  MutexLock lock(&mu_);
  if (shipped_.size() >= kMaxFolders && !shipped_.count(dir)) shipped_.clear();
  shipped_[dir] = shipped;
  return shipped.package;
}

}  // namespace orrery::runtime
