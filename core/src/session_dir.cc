#include "core/internal/session_dir.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

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
  if (name.rfind(kEmbeddedPrefix, 0) != 0 || end == std::string::npos || name.size() != end + 7)
    return 0;
  return PidFromDigits(std::string_view(name).substr(at, end - at));
}

}  // namespace

bool SessionRootIsChosen() {
  const char* t = std::getenv("ORRERY_TMPDIR");
  return t && *t;
}

std::string SessionRoot() {
  return SessionRootIsChosen() ? std::getenv("ORRERY_TMPDIR") : "/tmp/orrery";
}

void SpreadSubfolders(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  struct stat st;
  int flags = 0;
  if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 &&
      !(flags & FS_TOPDIR_FL)) {
    flags |= FS_TOPDIR_FL;
    ioctl(fd, FS_IOC_SETFLAGS, &flags);
  }
  close(fd);
}

std::string MakeEmbeddedFolder() {
  std::string root = SessionRoot();
  mkdir(root.c_str(), 0777);  // shared by this host's users, as the session directories
  SpreadSubfolders(root);
  RemoveFoldersOfEndedProcesses(root, EmbeddedFolderPid, kEmbeddedAbandonedS);
  std::string dir = root + "/" + kEmbeddedPrefix + std::to_string(getpid()) + "_XXXXXX";
  return mkdtemp(dir.data()) ? dir : "";
}

}  // namespace orrery
