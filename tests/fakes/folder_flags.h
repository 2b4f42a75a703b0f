// A folder's inode flags (FS_IOC_GETFLAGS), and whether a file system keeps FS_TOPDIR_FL, for
// the tests of the folders Orrery spreads (SpreadSubfolders, core/internal/session_dir.h).
#pragma once

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

namespace orrery::testing {

// The folder's inode flags, or nullopt where the file system has none.
inline std::optional<int> FolderFlags(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  int flags = 0;
  bool ok = ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  close(fd);
  return ok ? std::optional<int>(flags) : std::nullopt;
}

inline bool HasTopdirFlag(const std::string& dir) {
  return FolderFlags(dir).value_or(0) & FS_TOPDIR_FL;
}

// Whether the file system of `parent` keeps FS_TOPDIR_FL: asked of a folder made (and
// removed) there for the purpose.
inline bool KeepsTopdirFlag(const std::string& parent) {
  std::string probe = parent + "/topdir-probe";
  if (mkdir(probe.c_str(), 0700) != 0) return false;
  bool kept = false;
  if (std::optional<int> flags = FolderFlags(probe)) {
    int fd = open(probe.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int wanted = *flags | FS_TOPDIR_FL;
    kept = fd >= 0 && ioctl(fd, FS_IOC_SETFLAGS, &wanted) == 0 && HasTopdirFlag(probe);
    if (fd >= 0) close(fd);
  }
  std::error_code ec;
  std::filesystem::remove_all(probe, ec);
  return kept;
}

}  // namespace orrery::testing
