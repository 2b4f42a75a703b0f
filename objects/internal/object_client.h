// A process's link to its node's shared-memory object store (docs/objects.md): creates the
// objects this process writes (Put, large arguments and results), opens the ones it reads
// (pulled to this node first when their primary is elsewhere) and frees the ones it owns.
//
// The node gives out regions of one arena file, which this process maps once and keeps
// mapped; a value is written there once and read in place. Every operation is a request to
// the node answered on the runtime's inbox (OnReply): Create and Open block their caller
// until the answer, with a deadline, never forever.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/internal/outbox.h"
#include "core/internal/protocol_objects.h"
#include "core/internal/thread_annotations.h"
#include "orrery/ids.h"
#include "orrery/status.h"

namespace orrery::objects {

class ShmArena;
class ObjectClient;

// Values whose packed size is above this stay in a node's store; smaller ones travel inline.
inline constexpr uint64_t kInlineObjectMaxBytes = 100 * 1024;

// A region of the arena being written by its creator: Seal when the bytes are there.
struct ObjectRegion {
  char* data = nullptr;
  uint64_t size = 0;
  proto::ObjectLocationMsg location;
};

// An object read in place, pinned on the node while this lives (the last copy releases it).
// It keeps the client, and so the arena's mapping, alive: a view outlives Shutdown safely.
class MappedObject {
 public:
  MappedObject(std::shared_ptr<ObjectClient> client, ObjectId id, const char* data, uint64_t size)
      : client_(std::move(client)), id_(id), data_(data), size_(size) {}
  // An object read from its spill file into this process: owns the bytes, pins nothing.
  MappedObject(ObjectId id, std::shared_ptr<const std::string> bytes)
      : id_(id), data_(bytes->data()), size_(bytes->size()), bytes_(std::move(bytes)) {}
  ~MappedObject();
  MappedObject(const MappedObject&) = delete;
  MappedObject& operator=(const MappedObject&) = delete;
  const char* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  std::shared_ptr<ObjectClient> client_;
  ObjectId id_;
  const char* data_;
  uint64_t size_;
  std::shared_ptr<const std::string> bytes_;  // when read from a spill file
};

class ObjectClient : public std::enable_shared_from_this<ObjectClient> {
 public:
  // `outbox` must outlive the client or Close() must come first.
  explicit ObjectClient(Outbox& outbox);
  ~ObjectClient();
  // The runtime is stopping: nothing more is sent; views still alive stay readable.
  void Close() EXCLUDES(mu_);
  // This process's inbox: where answers come, and the holder of its pins. Set before use.
  void SetSelf(const std::string& address) EXCLUDES(mu_);

  // The node whose store this process uses; empty: none (values stay in this process, as
  // for a driver with no node on its host). Set before the first value is stored.
  void SetNode(const std::string& node_address) EXCLUDES(mu_);
  bool available() const EXCLUDES(mu_);
  // Maps the arena at `path` when its header carries `tag`: how a driver finds a node on its
  // own host (docs/objects.md "Which store a process uses"). True when it did.
  bool TryAttach(const std::string& node_address, const std::string& path, const std::string& tag)
      EXCLUDES(mu_);

  // A region of `size` bytes for a new object, owned by `owner` (frees come from it).
  // ObjectStoreFullError-worthy errors come back as Unavailable with the node's message.
  Result<ObjectRegion> Create(const ObjectId& id, uint64_t size, const std::string& owner)
      EXCLUDES(mu_);
  // The bytes of `id` are written: readable from now on.
  void Seal(const ObjectId& id);
  // The object, read in place; pulled to this node first when it is not here. NotFound when
  // every copy is gone (ObjectLostError), Timeout past timeout_ms (-1: the default deadline).
  Result<std::shared_ptr<const MappedObject>> Open(const ObjectId& id,
                                                   const proto::ObjectLocationMsg& location,
                                                   int timeout_ms) EXCLUDES(mu_);
  // The owner's last reference is gone: every copy goes (sent to the primary's node). A free
  // sent to this process's node also rides on its next Create (ObjectStoreMsg::freed).
  void Free(const ObjectId& id, const proto::ObjectLocationMsg& location) EXCLUDES(mu_);

  // On the inbox thread: a node's answer.
  void OnReply(const proto::ObjectStoreReplyMsg& reply) EXCLUDES(mu_);

 private:
  friend class MappedObject;
  void Release(const ObjectId& id);
  Result<proto::ObjectStoreReplyMsg> Call(proto::MsgType type, proto::ObjectStoreMsg msg,
                                          int timeout_ms) EXCLUDES(mu_);
  // The object of an Open reply that names its spill file (the node had no room to restore
  // it), read and checked. NotFound when the file is gone (restored or freed since: ask
  // again); Internal naming why when it is not what was written (or not `size` bytes).
  Result<std::shared_ptr<const MappedObject>> ReadSpilled(const ObjectId& id,
                                                          const proto::ObjectStoreReplyMsg& reply,
                                                          uint64_t size);
  // Maps the arena a reply names, once. Returns the start of its object space.
  Result<char*> ArenaFor(const proto::ObjectStoreReplyMsg& reply) EXCLUDES(mu_);

  Outbox& outbox_;
  mutable Mutex mu_;
  std::string self_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
  CondVar cv_;
  std::string node_ GUARDED_BY(mu_);
  std::unique_ptr<ShmArena> arena_ GUARDED_BY(mu_);
  uint64_t next_request_ GUARDED_BY(mu_);
  std::map<uint64_t, std::optional<proto::ObjectStoreReplyMsg>> waiting_ GUARDED_BY(mu_);
  // Objects open in this process: a second Get of one reuses the mapping and its pin.
  std::map<ObjectId, std::weak_ptr<const MappedObject>> open_ GUARDED_BY(mu_);
  // Frees sent to node_ since the last Create (ids, binary), the latest kMaxFreedPerCreate.
  std::deque<std::string> freed_ GUARDED_BY(mu_);
};

}  // namespace orrery::objects
