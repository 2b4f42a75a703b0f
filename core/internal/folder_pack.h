// A runtime env's working_dir shipped to other hosts (docs/api.md "Runtime environments",
// docs/protocol.md "Working folders"): the submitter packs the folder into one byte string
// named by its SHA-256, the head keeps it, and a node that does not see the folder itself
// fetches the package once and unpacks it into its cache.
//
// A package is a msgpack array of entries [path, kind, content], sorted by path: `path` is
// relative ("a/b.txt"), `kind` is 0 for a folder, 1 for a file, 2 for an executable file,
// and `content` the file's bytes (empty for a folder). Only folders and regular files are
// packed: links and special files are left out. The same folder gives the same bytes.
#pragma once

#include <string>
#include <string_view>

#include "orrery/status.h"

namespace orrery::folder_pack {

// What one package may hold: bytes in all, entries, and folders one inside another.
inline constexpr size_t kMaxPackageBytes = size_t(256) << 20;
inline constexpr size_t kMaxEntries = 100000;
inline constexpr size_t kMaxDepth = 64;
inline constexpr size_t kMaxPathBytes = 4096;  // of one entry's relative path

struct Packed {
  std::string bytes;
  std::string hash;    // SHA-256 of `bytes`, 64 lowercase hex characters
  size_t files = 0;    // regular files packed
  size_t skipped = 0;  // links and special files left out
};

// Packs the folder `dir` (absolute). InvalidArgument naming the problem when the folder
// cannot be read, or its package would be over a limit above.
Result<Packed> Pack(const std::string& dir);

// What Pack would read, from the folder's listing alone (paths, kinds, sizes, modification
// times; no content).
struct Scan {
  // The same while nothing in the folder changed, so a submitter packs a folder again only
  // when it did.
  std::string digest;
  bool too_big = false;  // over a limit above: Pack would refuse it
};
// InvalidArgument naming the problem when the folder cannot be read.
Result<Scan> Fingerprint(const std::string& dir);

// Unpacks untrusted package bytes into the folder `dest`, which must not exist (its parent
// must). The package is written into a temporary folder beside `dest` and renamed, so
// `dest` appears whole or not at all; a `dest` that another process made meanwhile is kept.
// InvalidArgument, leaving nothing behind, for a malformed package: not the format above,
// entries out of order or repeated, a path that is absolute, empty, holds NUL, ".", ".."
// or an empty component, more than kMaxDepth components, or whose folder is not an earlier
// entry, more than kMaxEntries entries.
Status Unpack(std::string_view bytes, const std::string& dest);

// A temporary name beside `dest`, "<dest>.tmp<pid>-<n>": where Unpack writes a package before
// renaming it into place, and where a folder can be renamed before it is removed, so that a
// process killed mid-way leaves it for RemoveAbandoned, never half of `dest`.
std::string TempFolderFor(const std::string& dest);

// Removes the temporary folders that Unpack left in `parent` when its process was killed
// mid-way ("<name>.tmp<pid>-<n>" of a pid no longer running, untouched for `min_age_s`: a
// process of another pid namespace sharing the folder looks gone); those of running
// processes, and everything else, are kept. Returns how many it removed.
int RemoveAbandoned(const std::string& parent, double min_age_s = 600);

// The identity of the folder at `path` on this host: "<boot id>:<device>:<inode>", the same
// only for the same folder seen by the same running kernel (a bind mount into a container
// included); empty when `path` is no folder here or the boot id cannot be read.
std::string FolderIdentity(const std::string& path);

}  // namespace orrery::folder_pack
