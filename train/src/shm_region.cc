#include "train/src/shm_region.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
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

static_assert(sizeof(std::atomic<uint32_t>) == 4 && std::atomic<uint32_t>::is_always_lock_free,
              "the barrier's words are plain 32-bit futex words");

ShmBarrier::ShmBarrier(void* words, int parties)
    : arrived_(static_cast<std::atomic<uint32_t>*>(words)),
      generation_(static_cast<std::atomic<uint32_t>*>(words) + 1),
      parties_(uint32_t(parties)) {}

bool ShmBarrier::Arrive(uint32_t* ticket) {
  *ticket = generation_->load(std::memory_order_acquire);
  if (arrived_->fetch_add(1, std::memory_order_acq_rel) + 1 != parties_) return false;
  // Reset before opening: a party that sees the new generation may arrive again at once.
  arrived_->store(0, std::memory_order_relaxed);
  generation_->fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, generation_, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  return true;
}

bool ShmBarrier::WaitOpen(uint32_t ticket, std::chrono::steady_clock::time_point deadline) {
  // A short watch first: on a host with a core to spare the others are often a few
  // microseconds away, and a futex sleep and wake costs more than that.
  using Clock = std::chrono::steady_clock;
  const auto watch_until = Clock::now() + std::chrono::microseconds(20);
  while (generation_->load(std::memory_order_acquire) == ticket) {
    auto now = Clock::now();
    if (now >= deadline) return false;
    if (now < watch_until) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    auto left = std::min<Clock::duration>(deadline - now, std::chrono::seconds(1));
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec ts{time_t(ns / 1000000000), long(ns % 1000000000)};
    // Returns at once (EAGAIN) if the generation moved since the load above.
    syscall(SYS_futex, generation_, FUTEX_WAIT, ticket, &ts, nullptr, 0);
  }
  return true;
}

}  // namespace orrery::train
