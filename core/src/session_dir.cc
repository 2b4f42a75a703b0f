#include "core/internal/session_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>

#include "core/internal/process_exists.h"

namespace orrery {

namespace {

constexpr char kEmbeddedPrefix[] = "embedded_";
constexpr double kEmbeddedAbandonedS = 600;

// The pid in an embedded cluster's folder name "embedded_<pid>_<6 characters>"; 0 for any
// other name.
long EmbeddedFolderPid(const std::string& name) {
  const size_t at = sizeof(kEmbeddedPrefix) - 1, end = name.find('_', at);
  if (name.rfind(kEmbeddedPrefix, 0) != 0 || end == std::string::npos || end == at ||
      end - at > 9 || name.size() != end + 7)
    return 0;
  for (size_t i = at; i < end; ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return 0;
  return std::stol(name.substr(at, end - at));
}

}  // namespace

bool SessionRootIsChosen() {
  const char* t = std::getenv("ORRERY_TMPDIR");
  return t && *t;
}

std::string SessionRoot() {
  return SessionRootIsChosen() ? std::getenv("ORRERY_TMPDIR") : "/tmp/orrery";
}

std::string MakeEmbeddedFolder() {
  std::string root = SessionRoot();
  mkdir(root.c_str(), 0777);  // shared by this host's users, as the session directories
  RemoveFoldersOfEndedProcesses(root, EmbeddedFolderPid, kEmbeddedAbandonedS);
  std::string dir = root + "/" + kEmbeddedPrefix + std::to_string(getpid()) + "_XXXXXX";
  return mkdtemp(dir.data()) ? dir : "";
}

}  // namespace orrery
