#include "objects/src/node_objects.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/internal/log.h"
#include "objects/internal/spill_file.h"

namespace orrery::objects {

namespace {

// Arena bytes an object of `size` takes. Only called for sizes that were allocated, so the
// rounding cannot overflow.
uint64_t Footprint(uint64_t size) { return ArenaAllocator::Rounded(size).value_or(size); }

}  // namespace

std::string FormatSize(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const char* unit = "KiB";
  double value = double(bytes) / 1024;
  if (bytes >= (uint64_t(1) << 30)) {
    unit = "GiB";
    value = double(bytes) / double(uint64_t(1) << 30);
  } else if (bytes >= (uint64_t(1) << 20)) {
    unit = "MiB";
    value = double(bytes) / double(uint64_t(1) << 20);
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f %s", value, unit);
  return buf;
}

NodeObjects::NodeObjects(std::unique_ptr<ShmArena> arena, std::string spill_dir)
    : arena_(std::move(arena)), allocator_(arena_->capacity()), spill_dir_(std::move(spill_dir)) {}

Result<std::unique_ptr<NodeObjects>> NodeObjects::Create(const Options& options) {
  if (options.spill_dir.empty()) {
    return Status::InvalidArgument("object store: no spill directory given");
  }
  auto arena = ShmArena::Create(options.arena_path, options.capacity, options.tag);
  if (!arena.ok()) return arena.status();
  std::error_code ec;
  bool made = std::filesystem::create_directories(options.spill_dir, ec);
  if (ec || !std::filesystem::is_directory(options.spill_dir, ec)) {
    return Status::Unavailable("cannot create spill directory " + options.spill_dir + ": " +
                               (ec ? ec.message() : std::string("not a directory")));
  }
  if (made) {  // spill files hold users' data
    std::filesystem::permissions(options.spill_dir, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace, ec);
  }
  return std::unique_ptr<NodeObjects>(new NodeObjects(std::move(*arena), options.spill_dir));
}

NodeObjects::~NodeObjects() {
  for (const auto& [id, e] : objects_) {
    if (!e.in_memory) unlink(SpillPath(id).c_str());
  }
  if (rmdir(spill_dir_.c_str()) != 0 && errno != ENOENT) {
    LOG_WARN("cannot remove spill directory " + spill_dir_ + ": " + std::strerror(errno));
  }
}

std::string NodeObjects::SpillPath(const ObjectId& id) const { return spill_dir_ + "/" + id.Hex(); }

Status NodeObjects::FullError(uint64_t size, const std::string& spill_error) const {
  std::string m = "object store full: " + FormatSize(size) + " needed, capacity " +
                  FormatSize(arena_->capacity()) + ", " + FormatSize(allocator_.used()) +
                  " in use of which " + FormatSize(pinned_bytes_) + " pinned, " +
                  FormatSize(spilled_bytes_) + " spilled";
  if (!spill_error.empty()) m += "; spilling failed: " + spill_error;
  return Status::Unavailable(m);
}

Result<uint64_t> NodeObjects::AllocateOrSpill(uint64_t size) {
  auto rounded = ArenaAllocator::Rounded(size);
  uint64_t usable = allocator_.capacity() - allocator_.capacity() % ArenaAllocator::kAlignment;
  // Spill nothing when even spilling every candidate would leave too little room.
  uint64_t kept = allocator_.used() - evictable_bytes_;
  if (!rounded || *rounded > usable || usable - kept < *rounded) return FullError(size, "");
  while (true) {
    if (auto offset = allocator_.Allocate(size)) return *offset;
    // Fragmentation: the space would add up but no run is long enough yet.
    if (evictable_.empty()) return FullError(size, "");
    ObjectId victim = evictable_.begin()->second;
    Status s = Spill(victim, objects_.at(victim));
    if (!s.ok()) return FullError(size, s.message());
  }
}

Status NodeObjects::Spill(const ObjectId& id, Entry& e) {
  if (Status s = WriteSpillFile(SpillPath(id), arena_->data() + e.offset, e.size); !s.ok())
    return s;
  SetEvictable(id, e, false);
  allocator_.Free(e.offset);
  e.in_memory = false;
  spilled_bytes_ += e.size;
  ++num_spilled_;
  LOG_DEBUG("object store: spilled " + id.Hex() + " (" + FormatSize(e.size) + ")");
  return Status::Ok();
}

Status NodeObjects::Restore(const ObjectId& id, Entry& e) {
  std::string path = SpillPath(id);
  auto lost = [&](const Status& why) {
    return Status::Internal("object " + id.Hex() + " lost: spill file " + path + ": " +
                            why.message());
  };
  // The file is read back as untrusted: it must be exactly what was written. It is checked
  // before room is made for it, so that a broken file makes nothing else spill.
  auto fd = OpenSpillFile(path, e.size);
  if (!fd.ok()) return lost(fd.status());
  auto offset = AllocateOrSpill(e.size);
  if (!offset.ok()) {
    close(*fd);
    return offset.status();
  }
  Status read = ReadSpillBytes(*fd, arena_->data() + *offset, e.size);
  close(*fd);
  if (!read.ok()) {
    allocator_.Free(*offset);
    return lost(read);
  }
  unlink(path.c_str());
  e.in_memory = true;
  e.offset = *offset;
  spilled_bytes_ -= e.size;
  --num_spilled_;
  LOG_DEBUG("object store: restored " + id.Hex() + " (" + FormatSize(e.size) + ")");
  return Status::Ok();
}

void NodeObjects::SetEvictable(const ObjectId& id, Entry& e, bool on) {
  if (on == e.evictable) return;
  if (on) {
    evictable_.emplace(e.tick, id);
    evictable_bytes_ += Footprint(e.size);
  } else {
    evictable_.erase(e.tick);
    evictable_bytes_ -= Footprint(e.size);
  }
  e.evictable = on;
}

void NodeObjects::Refresh(const ObjectId& id, Entry& e) {
  SetEvictable(id, e, e.sealed && e.in_memory && e.pins == 0);
}

void NodeObjects::Touch(const ObjectId& id, Entry& e) {
  SetEvictable(id, e, false);
  e.tick = next_tick_++;
  Refresh(id, e);
}

void NodeObjects::Pin(const ObjectId& id, Entry& e, const std::string& holder) {
  ++e.holders[holder];
  if (e.pins++ == 0) pinned_bytes_ += e.size;
  by_holder_[holder].insert(id);
  Refresh(id, e);
}

void NodeObjects::Unpin(const ObjectId& id, Entry& e, const std::string& holder, int count) {
  auto h = e.holders.find(holder);
  if (h == e.holders.end()) return;
  int n = std::min(count, h->second);
  h->second -= n;
  if (h->second == 0) {
    e.holders.erase(h);
    auto by = by_holder_.find(holder);
    if (by != by_holder_.end()) {
      by->second.erase(id);
      if (by->second.empty()) by_holder_.erase(by);
    }
  }
  e.pins -= n;
  if (e.pins == 0 && n > 0) pinned_bytes_ -= e.size;
  Refresh(id, e);
}

void NodeObjects::Erase(Table::iterator it) {
  const ObjectId id = it->first;
  Entry& e = it->second;
  SetEvictable(id, e, false);
  for (const auto& [holder, count] : e.holders) {
    auto by = by_holder_.find(holder);
    if (by == by_holder_.end()) continue;
    by->second.erase(id);
    if (by->second.empty()) by_holder_.erase(by);
  }
  if (e.pins > 0) pinned_bytes_ -= e.size;
  if (e.in_memory) {
    allocator_.Free(e.offset);
  } else {
    unlink(SpillPath(id).c_str());
    spilled_bytes_ -= e.size;
    --num_spilled_;
  }
  auto owned = by_owner_.find(e.owner);
  if (owned != by_owner_.end()) {
    owned->second.erase(id);
    if (owned->second.empty()) by_owner_.erase(owned);
  }
  objects_.erase(it);
}

Result<ObjectLocation> NodeObjects::Create(const ObjectId& id, uint64_t size,
                                           const std::string& owner, const std::string& holder,
                                           bool primary) {
  if (objects_.count(id) != 0) {
    return Status::InvalidArgument("object " + id.Hex() + " already in the store");
  }
  auto offset = AllocateOrSpill(size);
  if (!offset.ok()) return offset.status();
  Entry& e = objects_[id];
  e.size = size;
  e.owner = owner;
  e.creator = holder;
  e.primary = primary;
  e.in_memory = true;
  e.offset = *offset;
  e.tick = next_tick_++;
  by_owner_[owner].insert(id);
  Pin(id, e, holder);
  return ObjectLocation{*offset, size, {}};
}

Status NodeObjects::Seal(const ObjectId& id, const std::string& holder) {
  auto it = objects_.find(id);
  if (it == objects_.end()) return Status::NotFound("object " + id.Hex() + " not in the store");
  Entry& e = it->second;
  if (e.sealed) return Status::InvalidArgument("object " + id.Hex() + " already sealed");
  if (holder != e.creator) {
    return Status::InvalidArgument("object " + id.Hex() + " sealed by " + holder +
                                   " but created by " + e.creator);
  }
  e.sealed = true;
  Touch(id, e);
  Unpin(id, e, holder, 1);
  return Status::Ok();
}

void NodeObjects::Abort(const ObjectId& id) {
  auto it = objects_.find(id);
  if (it != objects_.end() && !it->second.sealed) Erase(it);
}

Result<ObjectLocation> NodeObjects::Open(const ObjectId& id, const std::string& holder) {
  auto it = objects_.find(id);
  if (it == objects_.end() || !it->second.sealed) {
    return Status::NotFound("object " + id.Hex() + " not in the store");
  }
  Entry& e = it->second;
  if (!e.in_memory) {
    Status s = Restore(id, e);
    if (s.code() == StatusCode::kInternal) Erase(it);  // its bytes are gone
    // No room in the arena (everything else pinned, or spilling them failed: the spill disk
    // is full): the intact spill file is read where it lies. Not pinned, not touched.
    if (s.code() == StatusCode::kUnavailable) {
      LOG_DEBUG("object store: " + id.Hex() + " read from its spill file: " + s.message());
      return ObjectLocation{0, e.size, SpillPath(id)};
    }
    if (!s.ok()) return s;
  }
  Touch(id, e);
  Pin(id, e, holder);
  return ObjectLocation{e.offset, e.size, {}};
}

void NodeObjects::Release(const ObjectId& id, const std::string& holder) {
  auto it = objects_.find(id);
  if (it != objects_.end()) Unpin(id, it->second, holder, 1);
}

void NodeObjects::ReleaseHolder(const std::string& holder) {
  auto by = by_holder_.find(holder);
  if (by == by_holder_.end()) return;
  std::vector<ObjectId> ids(by->second.begin(), by->second.end());
  for (const ObjectId& id : ids) {
    auto it = objects_.find(id);
    if (it == objects_.end()) continue;
    if (!it->second.sealed && it->second.creator == holder) {
      Erase(it);  // nobody will seal it now
    } else {
      Unpin(id, it->second, holder, INT_MAX);
    }
  }
}

void NodeObjects::Free(const ObjectId& id) {
  auto it = objects_.find(id);
  if (it != objects_.end()) Erase(it);
}

std::vector<ObjectId> NodeObjects::FreeOwnedBy(const std::string& owner) {
  auto owned = by_owner_.find(owner);
  if (owned == by_owner_.end()) return {};
  std::vector<ObjectId> ids(owned->second.begin(), owned->second.end());
  for (const ObjectId& id : ids) Free(id);
  return ids;
}

bool NodeObjects::Contains(const ObjectId& id) const {
  auto it = objects_.find(id);
  return it != objects_.end() && it->second.sealed;
}

std::string NodeObjects::OwnerOf(const ObjectId& id) const {
  auto it = objects_.find(id);
  return it == objects_.end() ? std::string() : it->second.owner;
}

int NodeObjects::Pins(const ObjectId& id) const {
  auto it = objects_.find(id);
  return it == objects_.end() ? 0 : it->second.pins;
}

NodeObjectsUsage NodeObjects::Usage() const {
  NodeObjectsUsage u;
  u.capacity = arena_->capacity();
  u.used_bytes = allocator_.used();
  u.pinned_bytes = pinned_bytes_;
  u.spilled_bytes = spilled_bytes_;
  u.num_objects = objects_.size();
  u.num_spilled = num_spilled_;
  return u;
}

std::vector<NodeObjectInfo> NodeObjects::List() const {
  std::vector<NodeObjectInfo> out;
  out.reserve(objects_.size());
  for (const auto& [id, e] : objects_) {
    out.push_back({id, e.size, e.owner, e.sealed, !e.in_memory, e.pins, e.primary});
  }
  return out;
}

}  // namespace orrery::objects
