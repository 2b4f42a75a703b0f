// Where this host's Orrery files live: sessions (session_<...>/, session_latest), the embedded
// cluster's token, the head's and nodes' executables, logs and spill directories.
#pragma once

#include <string>

namespace orrery {

// $ORRERY_TMPDIR when set and not empty, else /tmp/orrery. Read at every call.
std::string SessionRoot();
// Whether SessionRoot() is the user's choice ($ORRERY_TMPDIR set and not empty), not the
// default. Read at every call.
bool SessionRootIsChosen();

// Asks the file system to place each new subfolder of `dir` away from its siblings: on
// ext2/3/4 (FS_TOPDIR_FL, which the Orlov allocator treats as the top of a hierarchy) each
// new subfolder goes to a block group of its own, so the many files a session or a node
// makes (a worker's two log files) are not allocated among the inodes that earlier sessions
// freed, which ext4 without a journal scans one by one (docs/benchmarks.md "Log folders
// apart"). Does nothing where the file system has no such flag or the caller does not own
// `dir`.
void SpreadSubfolders(const std::string& dir);

// Makes a folder for this process's embedded cluster (its token), "embedded_<pid>_XXXXXX" in
// SessionRoot() (mode 0700), after removing those of this user's processes that ended
// without removing theirs (drivers that were killed) and have been untouched for 10 minutes.
// "" when it cannot be made.
std::string MakeEmbeddedFolder();

}  // namespace orrery
