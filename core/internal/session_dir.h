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

// Makes a folder for this process's embedded cluster (its token), "embedded_<pid>_XXXXXX" in
// SessionRoot() (mode 0700), after removing those of this user's processes that ended
// without removing theirs (drivers that were killed) and have been untouched for 10 minutes.
// "" when it cannot be made.
std::string MakeEmbeddedFolder();

}  // namespace orrery
