#include "objects/internal/shm_arena.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "core/internal/log.h"

namespace orrery::objects {

namespace {

constexpr char kMagic[8] = {'O', 'R', 'R', 'Y', 'S', 'H', 'M', '1'};

// The first bytes of the file; the rest of the 4096-byte header is zero. Native byte order:
// the arena never leaves the node.
struct ArenaHeader {
  char magic[8];
  uint32_t version;
  uint32_t flags;  // kHeldFlag; 0 in arenas of older nodes
  uint64_t capacity;
  char tag[ShmArena::kMaxTagBytes];
};
static_assert(sizeof(ArenaHeader) <= ShmArena::kHeaderBytes);

// The creator holds an exclusive flock on the file from before the header is written until
// it ends, however it ends: an arena with this flag that no process locks was left by a node
// that died (RemoveAbandoned).
constexpr uint32_t kHeldFlag = 1;
constexpr char kArenaPrefix[] = "orrery-";

std::string ErrnoText(const std::string& what, const std::string& path, int err) {
  return what + " " + path + ": " + std::strerror(err);
}

// Largest capacity accepted: the file size (header + capacity) must fit in off_t.
constexpr uint64_t kMaxCapacity =
    uint64_t(std::numeric_limits<off_t>::max()) - ShmArena::kHeaderBytes;

Result<char*> MapFile(int fd, const std::string& path, uint64_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Status::Unavailable(ErrnoText("cannot map", path, errno));
  return static_cast<char*>(p);
}

// tmpfs accepts any ftruncate and only fails (SIGBUS) when a page is first written; say so
// up front when the filesystem cannot hold the whole arena.
void WarnIfTooSmall(int fd, const std::string& path, uint64_t capacity) {
  struct statvfs vfs;
  if (fstatvfs(fd, &vfs) != 0) return;
  uint64_t avail = uint64_t(vfs.f_bavail) * uint64_t(vfs.f_frsize);
  if (avail < capacity) {
    LOG_WARN("object store " + path + ": capacity " + std::to_string(capacity) +
             " bytes but only " + std::to_string(avail) +
             " bytes free on its filesystem; writes beyond that will fail");
  }
}

}  // namespace

Result<std::unique_ptr<ShmArena>> ShmArena::Create(const std::string& path, uint64_t capacity,
                                                   const std::string& tag) {
  if (capacity == 0 || capacity > kMaxCapacity) {
    return Status::InvalidArgument("object store " + path + ": capacity " +
                                   std::to_string(capacity) + " out of range");
  }
  if (tag.size() > kMaxTagBytes || tag.find('\0') != std::string::npos) {
    return Status::InvalidArgument("object store " + path +
                                   ": tag longer than 64 bytes or holding a NUL");
  }
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::Unavailable(ErrnoText("cannot create", path, errno));
  auto fail = [&](const char* what, int err) {
    close(fd);
    unlink(path.c_str());
    return Status::Unavailable(ErrnoText(what, path, err));
  };
  // Blocks only while a sweeping node looks at the new, still headerless file. A file system
  // without flock gets an arena without the flag, which no node removes for it.
  bool held = flock(fd, LOCK_EX) == 0;
  uint64_t bytes = kHeaderBytes + capacity;
  if (ftruncate(fd, off_t(bytes)) != 0) return fail("cannot size", errno);
  WarnIfTooSmall(fd, path, capacity);
  auto base = MapFile(fd, path, bytes);
  if (!base.ok()) {
    close(fd);
    unlink(path.c_str());
    return base.status();
  }
  ArenaHeader header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.version = kVersion;
  header.flags = held ? kHeldFlag : 0;
  header.capacity = capacity;
  std::memcpy(header.tag, tag.data(), tag.size());
  std::memcpy(*base, &header, sizeof(header));
  return std::unique_ptr<ShmArena>(new ShmArena(path, *base, capacity, fd));
}

std::vector<std::string> ShmArena::RemoveAbandoned(const std::string& dir) {
  std::vector<std::string> removed;
  DIR* d = opendir(dir.c_str());
  if (!d) return removed;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(kArenaPrefix, 0) != 0) continue;
    std::string tag = name.substr(sizeof(kArenaPrefix) - 1), path = dir + "/" + name;
    bool hex = !tag.empty() && tag.size() <= kMaxTagBytes &&
               tag.find_first_not_of("0123456789abcdef") == std::string::npos;
    struct stat st;
    if (!hex || lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
      continue;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    ArenaHeader h{};
    // Held: its node lives. Unheld but without the flag: a node too old to hold it, kept.
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && pread(fd, &h, sizeof(h), 0) == ssize_t(sizeof(h)) &&
        std::memcmp(h.magic, kMagic, sizeof(kMagic)) == 0 && (h.flags & kHeldFlag) &&
        std::string(h.tag, strnlen(h.tag, kMaxTagBytes)) == tag && unlink(path.c_str()) == 0) {
      removed.push_back(tag);
    }
    close(fd);
  }
  closedir(d);
  return removed;
}

Result<std::unique_ptr<ShmArena>> ShmArena::Attach(const std::string& path,
                                                   const std::string& tag) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int err = errno;
    std::string text = ErrnoText("cannot open", path, err);
    return err == ENOENT ? Status::NotFound(text) : Status::Unavailable(text);
  }
  auto fail = [&](const std::string& why) -> Status {
    close(fd);
    return Status::InvalidArgument("not this node's object store: " + path + ": " + why);
  };
  struct stat st;
  if (fstat(fd, &st) != 0) return fail(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail("not a regular file");
  uint64_t size = uint64_t(st.st_size);
  ArenaHeader header{};
  if (size < kHeaderBytes || pread(fd, &header, sizeof(header), 0) != ssize_t(sizeof(header))) {
    return fail("truncated header");
  }
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0) return fail("bad magic");
  if (header.version != kVersion) {
    return fail("version " + std::to_string(header.version) + ", expected " +
                std::to_string(kVersion));
  }
  if (header.capacity == 0 || header.capacity != size - kHeaderBytes) {
    return fail("file size " + std::to_string(size) + " does not match capacity " +
                std::to_string(header.capacity));
  }
  std::string stored(header.tag, strnlen(header.tag, kMaxTagBytes));
  if (stored != tag) return fail("tag mismatch");
  auto base = MapFile(fd, path, size);
  close(fd);
  if (!base.ok()) return base.status();
  return std::unique_ptr<ShmArena>(new ShmArena(path, *base, header.capacity, -1));
}

ShmArena::~ShmArena() {
  munmap(base_, kHeaderBytes + capacity_);
  if (lock_fd_ < 0) return;
  if (unlink(path_.c_str()) != 0 && errno != ENOENT) {
    LOG_WARN(ErrnoText("cannot remove object store", path_, errno));
  }
  close(lock_fd_);  // after the unlink: no sweeping node finds the file unheld
}

ArenaAllocator::ArenaAllocator(uint64_t capacity) : capacity_(capacity) {
  uint64_t usable = capacity - capacity % kAlignment;
  if (usable > 0) AddFree(0, usable);
}

std::optional<uint64_t> ArenaAllocator::Rounded(uint64_t size) {
  if (size > std::numeric_limits<uint64_t>::max() - (kAlignment - 1)) return std::nullopt;
  uint64_t r = (size + kAlignment - 1) / kAlignment * kAlignment;
  return r == 0 ? kAlignment : r;
}

void ArenaAllocator::AddFree(uint64_t offset, uint64_t size) {
  free_by_offset_.emplace(offset, size);
  free_by_size_.emplace(size, offset);
}

void ArenaAllocator::RemoveFree(std::map<uint64_t, uint64_t>::iterator it) {
  free_by_size_.erase({it->second, it->first});
  free_by_offset_.erase(it);
}

std::optional<uint64_t> ArenaAllocator::Allocate(uint64_t size) {
  auto rounded = Rounded(size);
  if (!rounded) return std::nullopt;
  auto best = free_by_size_.lower_bound({*rounded, 0});
  if (best == free_by_size_.end()) return std::nullopt;
  auto [run_size, offset] = *best;
  RemoveFree(free_by_offset_.find(offset));
  if (run_size > *rounded) AddFree(offset + *rounded, run_size - *rounded);
  allocated_.emplace(offset, *rounded);
  used_ += *rounded;
  return offset;
}

void ArenaAllocator::Free(uint64_t offset) {
  auto a = allocated_.find(offset);
  if (a == allocated_.end()) {
    if (!bad_free_logged_) {
      bad_free_logged_ = true;
      LOG_ERROR("object store: free of offset " + std::to_string(offset) +
                " that is not allocated (ignored; further ones are not logged)");
    }
    return;
  }
  uint64_t start = offset;
  uint64_t size = a->second;
  used_ -= size;
  allocated_.erase(a);
  auto next = free_by_offset_.lower_bound(offset);
  if (next != free_by_offset_.end() && next->first == start + size) {
    size += next->second;
    next = std::next(next);
    RemoveFree(std::prev(next));
  }
  if (next != free_by_offset_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      RemoveFree(prev);
    }
  }
  AddFree(start, size);
}

uint64_t ArenaAllocator::largest_free() const {
  return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

}  // namespace orrery::objects
