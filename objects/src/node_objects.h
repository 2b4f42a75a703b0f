// A node's object table over its shared-memory arena, with spilling to disk when the arena is
// full (docs/architecture.md, "Object store (shared memory and spilling)").
//
// Contract: not thread-safe; the node calls it from one thread (or under its own mutex).
// "holder" is the address of the process that pins (a driver or worker inbox address);
// "owner" is the address of the process that owns the object (its creator, or the owner
// named when a copy is pulled).
//
// An object is either in the arena or in its spill file <spill_dir>/<id hex>, never both: a
// restore deletes the file (objects/internal/spill_file.h). Only sealed objects nobody pins are
// spilled, least recently opened (or sealed) first. Spilling and restoring are synchronous.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "objects/internal/shm_arena.h"
#include "orrery/ids.h"
#include "orrery/status.h"

namespace orrery::objects {

struct ObjectLocation {
  uint64_t offset = 0;  // in the arena's object space (ShmArena::data())
  uint64_t size = 0;
  // Set by Open when a spilled object cannot be restored for want of room: its bytes are in
  // this spill file (read it with ReadSpillFile, objects/internal/spill_file.h) and `offset`
  // means nothing. Such an Open pins nothing (no Release); the file may be gone by the time
  // it is read if the object is restored or freed meanwhile: ask again.
  std::string spill_file;
};

struct NodeObjectInfo {  // for listing (orrery list objects)
  ObjectId id;
  uint64_t size = 0;
  std::string owner;
  bool sealed = false;
  bool spilled = false;
  int pins = 0;
  bool primary = true;  // created here (false: a copy pulled from another node)
};

struct NodeObjectsUsage {
  uint64_t capacity = 0, used_bytes = 0 /* in the arena, rounded */, pinned_bytes = 0,
           spilled_bytes = 0;
  uint64_t num_objects = 0, num_spilled = 0;
};

// "300.0 MiB", "0 B": sizes in the store's messages.
std::string FormatSize(uint64_t bytes);

class NodeObjects {
 public:
  struct Options {
    std::string arena_path;  // e.g. /dev/shm/orrery-<node id hex>
    uint64_t capacity = 0;
    // This node's own directory; created if missing. The destructor removes the spill files
    // it wrote, then the directory if that left it empty.
    std::string spill_dir;
    std::string tag;  // written into the arena header
  };
  // Errors: those of ShmArena::Create, or Unavailable when spill_dir cannot be created.
  static Result<std::unique_ptr<NodeObjects>> Create(const Options& options);
  ~NodeObjects();  // removes spill files and the spill dir; the arena file goes with the ShmArena

  NodeObjects(const NodeObjects&) = delete;
  NodeObjects& operator=(const NodeObjects&) = delete;

  // Reserves `size` bytes for a new object, pinned by `holder` until Seal. When the free space
  // cannot hold it, spills sealed unpinned objects (least recently opened first) to spill_dir
  // and retries. Errors: InvalidArgument (id exists); Unavailable when it cannot fit even after
  // spilling, with a message naming the sizes, e.g. "object store full: 300.0 MiB needed,
  // capacity 256.0 MiB, 200.0 MiB in use of which 200.0 MiB pinned, 0 B spilled" (plus
  // "; spilling failed: <why>" when a spill failed: that object stays in memory).
  Result<ObjectLocation> Create(const ObjectId& id, uint64_t size, const std::string& owner,
                                const std::string& holder, bool primary = true);
  // The creator wrote the bytes: the object becomes readable; the creator's pin is dropped.
  // NotFound when absent; InvalidArgument when already sealed.
  Status Seal(const ObjectId& id, const std::string& holder);
  // Drops an unsealed object (its creator failed or died). A sealed or absent one: no-op.
  void Abort(const ObjectId& id);
  // A sealed object's location, pinned by `holder` (pins count; one Release per Open). A
  // spilled object is restored into the arena first (which may spill others); when it
  // cannot fit (the rest is pinned, or spilling others failed) it stays spilled and the
  // location names its intact spill file instead (spill_file; nothing pinned). NotFound
  // when absent or not sealed; Internal when its spill file is missing, truncated or not what
  // was written (the object is then lost and dropped), naming why.
  Result<ObjectLocation> Open(const ObjectId& id, const std::string& holder);
  // Drops one of `holder`'s pins on `id`; no-op when it holds none.
  void Release(const ObjectId& id, const std::string& holder);
  // Drops every pin `holder` has (its process exited), and aborts the unsealed objects it
  // was creating (nobody will seal them).
  void ReleaseHolder(const std::string& holder);
  // Deletes the object: arena space, spill file, pins. Idempotent.
  void Free(const ObjectId& id);
  // Deletes every object whose owner is `owner` (the owner process ended); returns their ids.
  std::vector<ObjectId> FreeOwnedBy(const std::string& owner);
  bool Contains(const ObjectId& id) const;  // sealed (in memory or spilled)
  // How many pins `id` has (0 when absent): a free waits for the last reader.
  int Pins(const ObjectId& id) const;
  // The owner of `id`, sealed or not ("" when absent).
  std::string OwnerOf(const ObjectId& id) const;
  NodeObjectsUsage Usage() const;
  std::vector<NodeObjectInfo> List() const;
  ShmArena& arena() { return *arena_; }

 private:
  struct Entry {
    uint64_t size = 0;
    std::string owner;
    std::string creator;  // the holder that created it (pinned until Seal)
    bool primary = true;
    bool sealed = false;
    bool in_memory = false;  // else in its spill file
    uint64_t offset = 0;     // when in_memory
    uint64_t tick = 0;       // last Seal or Open: the key in evictable_
    int pins = 0;            // sum of holders' counts; > 0 implies in_memory
    bool evictable = false;  // in evictable_: sealed, in_memory and pins == 0
    std::unordered_map<std::string, int> holders;
  };
  using Table = std::unordered_map<ObjectId, Entry, IdHash>;

  NodeObjects(std::unique_ptr<ShmArena> arena, std::string spill_dir);

  // Arena space for `size` bytes, spilling evictable objects until it fits.
  Result<uint64_t> AllocateOrSpill(uint64_t size);
  Status FullError(uint64_t size, const std::string& spill_error) const;
  Status Spill(const ObjectId& id, Entry& e);
  Status Restore(const ObjectId& id, Entry& e);
  void Pin(const ObjectId& id, Entry& e, const std::string& holder);
  void Unpin(const ObjectId& id, Entry& e, const std::string& holder, int count);
  void Touch(const ObjectId& id, Entry& e);  // now the most recently used
  void SetEvictable(const ObjectId& id, Entry& e, bool on);
  void Refresh(const ObjectId& id, Entry& e);  // evictable iff sealed, in memory, unpinned
  void Erase(Table::iterator it);
  std::string SpillPath(const ObjectId& id) const;

  std::unique_ptr<ShmArena> arena_;
  ArenaAllocator allocator_;
  std::string spill_dir_;
  Table objects_;
  // Sealed, in-memory, unpinned objects by tick (oldest first): what may be spilled.
  std::map<uint64_t, ObjectId> evictable_;
  uint64_t evictable_bytes_ = 0;  // their rounded sizes
  std::unordered_map<std::string, std::unordered_set<ObjectId, IdHash>> by_holder_;
  std::unordered_map<std::string, std::unordered_set<ObjectId, IdHash>> by_owner_;
  uint64_t next_tick_ = 1;
  uint64_t pinned_bytes_ = 0;
  uint64_t spilled_bytes_ = 0;
  uint64_t num_spilled_ = 0;
};

}  // namespace orrery::objects
