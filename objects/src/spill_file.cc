#include "objects/internal/spill_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace orrery::objects {

namespace {

// One write() or read() moves at most this much (Linux caps a call near 2 GiB anyway).
constexpr uint64_t kMaxIoBytes = uint64_t(1) << 30;

// Writes all of [p, p + size) to fd; an errno value on failure (0: done).
int WriteAll(int fd, const char* p, uint64_t size) {
  while (size > 0) {
    ssize_t n = write(fd, p, std::min(size, kMaxIoBytes));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return ENOSPC;
    p += n;
    size -= uint64_t(n);
  }
  return 0;
}

}  // namespace

Status WriteSpillFile(const std::string& path, const char* data, uint64_t size) {
  std::string partial = path + ".partial";
  int fd = open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return Status::Unavailable("cannot create spill file " + partial + ": " + std::strerror(errno));
  int err = WriteAll(fd, data, size);
  if (close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && rename(partial.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    unlink(partial.c_str());
    return Status::Unavailable("cannot write spill file " + path + ": " + std::strerror(err));
  }
  return Status::Ok();
}

Result<int> OpenSpillFile(const std::string& path, uint64_t size) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    std::string why = errno == ENOENT ? "missing" : std::strerror(errno);
    return errno == ENOENT ? Status::NotFound(why) : Status::Internal(why);
  }
  struct stat st;
  std::string why;
  if (fstat(fd, &st) != 0) {
    why = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else if (uint64_t(st.st_size) != size) {
    why = (uint64_t(st.st_size) < size ? "truncated: size " : "size ") +
          std::to_string(st.st_size) + ", written " + std::to_string(size);
  }
  if (!why.empty()) {
    close(fd);
    return Status::Internal(why);
  }
  return fd;
}

Status ReadSpillBytes(int fd, char* out, uint64_t size) {
  while (size > 0) {
    ssize_t n = read(fd, out, std::min(size, kMaxIoBytes));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Internal(std::strerror(errno));
    if (n == 0) return Status::Internal("truncated: shorter than written");
    out += n;
    size -= uint64_t(n);
  }
  return Status::Ok();
}

Result<std::shared_ptr<std::string>> ReadSpillFile(const std::string& path, uint64_t size) {
  auto fd = OpenSpillFile(path, size);
  if (!fd.ok()) return fd.status();
  auto bytes = std::make_shared<std::string>(size, '\0');
  Status s = ReadSpillBytes(*fd, bytes->data(), size);
  close(*fd);
  if (!s.ok()) return s;
  return bytes;
}

}  // namespace orrery::objects
