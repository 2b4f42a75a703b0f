// The object plane (docs/protocol.md "Objects"): a process and its node's shared-memory
// object store, nodes between themselves, and the location a large value travels as in call
// replies, object replies and call arguments. The bytes themselves never travel in these
// messages: on a node they are read from the store's arena, between nodes they are pulled
// over the data channel (objects/internal/object_transfer.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/internal/error_kind.h"
#include "core/internal/protocol_wire.h"

namespace orrery::proto {

// Where a value kept in a node's store lives: the node holding its primary copy. Empty
// (size 0 and no node) for a value that travels inline.
struct ObjectLocationMsg {
  std::string node_address;  // that node's inbox: frees go there
  std::string data_address;  // its object server (host:port): pulls go there
  uint64_t size = 0;         // the value's packed bytes
  bool empty() const { return node_address.empty(); }
  MSGPACK_DEFINE(node_address, data_address, size);
};

// A call argument passed by reference (a value kept in a store): the worker reads it from its
// node's store (pulled there first when the primary is elsewhere) instead of the call
// carrying its bytes. Travels in the call's argument array as a msgpack ext of this type.
inline constexpr int8_t kObjectArgExt = 80;
struct ObjectArgMsg {
  std::string object_id;
  std::string owner;  // the owning process's address
  ObjectLocationMsg location;
  MSGPACK_DEFINE(object_id, owner, location);
};

// kObjectCreate, kObjectSeal, kObjectOpen, kObjectRelease: a process -> its node.
struct ObjectStoreMsg {
  uint64_t request_id = 0;  // Create and Open are answered with kObjectStoreReply
  std::string reply_to;     // the process's inbox; also the holder of its pins
  std::string object_id;
  uint64_t size = 0;
  std::string owner;  // Create: the owning process (frees come from it; its death frees)
  std::string job_id;
  ObjectLocationMsg source;  // Open: the primary, pulled from when this node has no copy
  // Create: the objects whose kObjectFree this process sent to the node since its last Create
  // (at most kMaxFreedPerCreate, the latest). A free sent from another thread may arrive after
  // the Create; the node frees these first, so that the new object can take their room.
  std::vector<std::string> freed;
  MSGPACK_DEFINE(request_id, reply_to, object_id, size, owner, job_id, source, freed);
};
inline constexpr size_t kMaxFreedPerCreate = 64;

struct ObjectStoreReplyMsg {
  uint64_t request_id = 0;
  bool ok = false;
  ErrorKind error_kind = ErrorKind::kNone;  // kObjectStoreFullError, kObjectLostError, kError
  std::string message;
  uint64_t offset = 0;  // in the arena's object space
  uint64_t size = 0;
  std::string arena_path;      // the arena a process maps (once) to read and write objects
  std::string arena_tag;       // proves the file at arena_path is this node's arena
  ObjectLocationMsg location;  // Create: the new object's location
  // Open: when not empty, the object stays spilled (no room in the store to restore it) and
  // its bytes are read from this spill file on the node's host (offset means nothing and
  // nothing is pinned). The reader checks it as untrusted (objects/internal/spill_file.h).
  std::string spill_file;
  MSGPACK_DEFINE(request_id, ok, error_kind, message, offset, size, arena_path, arena_tag, location,
                 spill_file);
};

// kObjectFree: the owner -> the primary's node (the last reference is gone), and that node
// -> the nodes that pulled copies. Unknown ids are ignored.
struct ObjectFreeMsg {
  std::vector<std::string> object_ids;
  MSGPACK_DEFINE(object_ids);
};

// kObjectCopied: a node that pulled a copy -> the primary's node, so a free reaches it.
struct ObjectCopiedMsg {
  std::string object_id;
  std::string node_address;
  MSGPACK_DEFINE(object_id, node_address);
};

// kListObjects -> a node; kListObjectsReply: what its store holds (orrery list objects).
struct ListObjectsMsg {
  uint64_t request_id = 0;
  std::string reply_to;
  MSGPACK_DEFINE(request_id, reply_to);
};

struct ObjectInfoMsg {
  std::string object_id;  // hex
  uint64_t size = 0;
  std::string owner;
  bool spilled = false;
  bool primary = true;
  int pins = 0;
  MSGPACK_DEFINE(object_id, size, owner, spilled, primary, pins);
};

struct ObjectStoreUsageMsg {
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t spilled_bytes = 0;
  uint64_t num_objects = 0;
  MSGPACK_DEFINE(capacity_bytes, used_bytes, spilled_bytes, num_objects);
};

struct ListObjectsReplyMsg {
  uint64_t request_id = 0;
  std::string node_id;  // hex
  ObjectStoreUsageMsg usage;
  std::vector<ObjectInfoMsg> objects;  // at most kMaxListedObjects
  bool truncated = false;
  MSGPACK_DEFINE(request_id, node_id, usage, objects, truncated);
};
inline constexpr size_t kMaxListedObjects = 10000;

}  // namespace orrery::proto
