// The node's shared-memory arena and the offset allocator that carves it
// (docs/architecture.md, "Object store (shared memory and spilling)").
//
// ShmArena: one file (mode 0600, under /dev/shm by default) mapped MAP_SHARED, holding a
// node's objects. Layout: a 4096-byte header {magic "ORRYSHM1", version, capacity, tag (up to
// 64 bytes, NUL padded)} then `capacity` bytes of object space. Pages are allocated by the
// kernel on first write and never given back while the arena lives, so a region that is
// reused is written at memory speed. The node creates the arena and owns the file (it is
// unlinked when the creating ShmArena is destroyed, and holds an flock on it until then, so
// that the arena of a node that was killed is found and removed by the next node of the
// host: RemoveAbandoned); workers and drivers on the node Attach to it and write the
// objects they create into regions the node gave them.
//
// ArenaAllocator: which offsets of the object space are in use. It hands out offsets only;
// it never touches the memory. Neither class is thread-safe: the node uses them from one
// thread (or under its own mutex).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "orrery/status.h"

namespace orrery::objects {

class ShmArena {
 public:
  static constexpr uint64_t kHeaderBytes = 4096;
  static constexpr size_t kMaxTagBytes = 64;
  static constexpr uint32_t kVersion = 1;

  // Creates `path` (O_CREAT|O_EXCL, 0600), sizes it (ftruncate) and maps it. The creator
  // unlinks the file when destroyed. Errors name the path and the errno text: InvalidArgument
  // for a zero capacity or a tag longer than 64 bytes (or holding a NUL), Unavailable when
  // the file cannot be created, sized or mapped (it exists already, no space, ...).
  static Result<std::unique_ptr<ShmArena>> Create(const std::string& path, uint64_t capacity,
                                                  const std::string& tag);
  // Maps an existing arena read-write. Checks the magic, version, that the file size matches
  // the header's capacity, and the tag (proves it is this node's arena): InvalidArgument
  // otherwise; NotFound when there is no such file. The file's bytes are untrusted until
  // these checks pass (the header is read with pread, never through the mapping).
  static Result<std::unique_ptr<ShmArena>> Attach(const std::string& path, const std::string& tag);
  // Removes the arenas in `dir` whose creators died without removing them (killed nodes):
  // files "orrery-<tag>" of this user whose header says their creator holds a lock on them,
  // and that no process locks. An arena a running node holds, one of a node too old to
  // hold it, and anything else are kept. Returns the removed arenas' tags (lowercase hex).
  static std::vector<std::string> RemoveAbandoned(const std::string& dir);
  ~ShmArena();

  ShmArena(const ShmArena&) = delete;
  ShmArena& operator=(const ShmArena&) = delete;

  // Start of object space (offsets handed out by ArenaAllocator are relative to it). Page
  // aligned, so 64-byte aligned offsets give 64-byte aligned addresses.
  char* data() const { return base_ + kHeaderBytes; }
  uint64_t capacity() const { return capacity_; }
  const std::string& path() const { return path_; }

 private:
  ShmArena(std::string path, char* base, uint64_t capacity, int lock_fd)
      : path_(std::move(path)), base_(base), capacity_(capacity), lock_fd_(lock_fd) {}

  std::string path_;
  char* base_;  // the whole mapping: header then object space
  uint64_t capacity_;
  int lock_fd_;  // the creator's: holds its flock, unlinks path_ when destroyed; -1 attached
};

// Offset allocator over [0, capacity): 64-byte aligned, best-fit (the smallest free run that
// holds the request, lowest offset among equals), free runs coalesced with their neighbours.
// Allocate and Free are O(log n) in the number of runs.
class ArenaAllocator {
 public:
  static constexpr uint64_t kAlignment = 64;

  explicit ArenaAllocator(uint64_t capacity);
  // nullopt when no free run is large enough; size 0 is allowed (takes 64 bytes).
  std::optional<uint64_t> Allocate(uint64_t size);
  // An offset Allocate returned; anything else is ignored (and logged once).
  void Free(uint64_t offset);
  uint64_t used() const { return used_; }  // bytes allocated (rounded up to 64)
  uint64_t capacity() const { return capacity_; }
  uint64_t largest_free() const;
  // The bytes a request of `size` takes (rounded up to 64, at least 64); nullopt on overflow.
  static std::optional<uint64_t> Rounded(uint64_t size);

 private:
  void AddFree(uint64_t offset, uint64_t size);
  void RemoveFree(std::map<uint64_t, uint64_t>::iterator it);

  uint64_t capacity_;
  uint64_t used_ = 0;
  std::map<uint64_t, uint64_t> free_by_offset_;           // offset -> size
  std::set<std::pair<uint64_t, uint64_t>> free_by_size_;  // (size, offset)
  std::unordered_map<uint64_t, uint64_t> allocated_;      // offset -> rounded size
  bool bad_free_logged_ = false;
};

}  // namespace orrery::objects
