// The working_dirs of this process's tasks and actors in a cluster (docs/api.md "Runtime
// environments"): each folder is packed (folder_pack.h), stored on the head by its SHA-256
// and named in the work's runtime env, so that a node on another host runs the work in its
// own copy. A folder is looked at again at most every kRescanS, and packed and uploaded
// again only when its listing changed, or when the head no longer keeps it (asked at most
// every kRecheckS). A job's default (Config::runtime_env) is a snapshot, as Ray's: packed
// at its first use only.
//
// Thread-safe: submissions from any thread.
#pragma once

#include <map>
#include <string>

#include "actors/src/head_client.h"
#include "core/internal/thread_annotations.h"

namespace orrery::runtime {

class WorkingDirs {
 public:
  explicit WorkingDirs(HeadClient& head) : head_(head) {}

  struct Package {
    std::string hash;  // of the package the head keeps
    std::string id;    // the folder's identity on this host (folder_pack::FolderIdentity)
  };
  // `dir` (absolute, a folder here) packed and stored on the head (`snapshot`: as first
  // packed, not looked at again); no package (a warning logged) for a folder over
  // folder_pack's limits, which nodes then use in place. Throws ConfigError naming `what`
  // for a folder that cannot be read, the head's error kind when it refuses the package,
  // ConnectionError when it does not answer.
  Package Ship(const std::string& dir, const std::string& what, bool snapshot) EXCLUDES(mu_);

 private:
  static constexpr size_t kMaxFolders = 256;
  static constexpr double kRescanS = 1;
  static constexpr double kRecheckS = 60;

  struct Shipped {
    std::string fingerprint;  // folder_pack::Scan::digest when it was packed
    Package package;          // no hash: too big to ship
    double scanned_at = 0;    // when its listing was last looked at (monotonic seconds)
    double checked_at = 0;    // when the head last said it keeps it
  };
  // Packs `dir`, stores it on the head and remembers it.
  Package Upload(const std::string& dir, const std::string& what, const std::string& fingerprint,
                 double now) EXCLUDES(mu_);
  Package Remember(const std::string& dir, const Shipped& shipped) EXCLUDES(mu_);

  HeadClient& head_;
  Mutex mu_;
  std::map<std::string, Shipped> shipped_ GUARDED_BY(mu_);  // by folder
};

}  // namespace orrery::runtime
