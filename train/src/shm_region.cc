#include "train/src/shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <random>

namespace orrery::train {

namespace {

Status Map(int fd, size_t bytes, char** out) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Status::Unavailable(std::string("mmap: ") + std::strerror(errno));
  *out = static_cast<char*>(p);
  return Status::Ok();
}

}  // namespace

ShmRegion::~ShmRegion() {
  if (data_ != nullptr) munmap(data_, size_);
  Unlink();
}

Status ShmRegion::Create(size_t bytes) {
  std::random_device rd;
  char name[64];
  std::snprintf(name, sizeof(name), "/orrery-coll-%d-%08x%08x", int(getpid()), rd(), rd());
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return Status::Unavailable(std::string("shm_open: ") + std::strerror(errno));
  name_ = name;
  owner_ = true;
  int rc = posix_fallocate(fd, 0, off_t(bytes));
  if (rc != 0) {
    close(fd);
    Unlink();
    return Status::Unavailable(std::string("reserving ") + std::to_string(bytes >> 20) +
                               " MB of shared memory: " + std::strerror(rc));
  }
  Status s = Map(fd, bytes, &data_);
  close(fd);
  if (!s.ok()) {
    Unlink();
    return s;
  }
  size_ = bytes;
  return Status::Ok();
}

Status ShmRegion::Open(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0)
    return Status::Unavailable(std::string("shm_open ") + name + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || size_t(st.st_size) < bytes) {
    close(fd);
    return Status::Unavailable("shared memory " + name + " is smaller than expected");
  }
  Status s = Map(fd, bytes, &data_);
  close(fd);
  if (s.ok()) {
    size_ = bytes;
    name_ = name;
  }
  return s;
}

void ShmRegion::Unlink() {
  if (owner_ && !name_.empty()) shm_unlink(name_.c_str());
  owner_ = false;
}

}  // namespace orrery::train
