// Where this host's Orrery files live: sessions (session_<...>/, session_latest), the embedded
// cluster's token, the head's and nodes' executables, logs and spill directories.
#pragma once

#include <string>

namespace orrery {

// $ORRERY_TMPDIR when set and not empty, else /tmp/orrery. Read at every call.
std::string SessionRoot();

}  // namespace orrery
