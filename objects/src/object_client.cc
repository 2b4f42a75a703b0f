#include "objects/internal/object_client.h"

#include <chrono>
#include <filesystem>

#include "core/internal/log.h"
#include "objects/internal/shm_arena.h"
#include "objects/internal/spill_file.h"

namespace orrery::objects {

using proto::MsgType;

namespace {
// How long a Create or Open waits for the node when the caller set no deadline: generous
// for a pull (a slow link moves 100 MB/s), bounded so a dead node never hangs a Get.
int DefaultDeadlineMs(uint64_t size) { return 30000 + int(size / (100 << 20) * 1000); }
}  // namespace

MappedObject::~MappedObject() {
  if (client_) client_->Release(id_);
}

ObjectClient::ObjectClient(Outbox& outbox)
    : outbox_(outbox), next_request_(proto::RequestIdBase()) {}

ObjectClient::~ObjectClient() = default;

void ObjectClient::Close() {
  MutexLock lock(&mu_);
  closed_ = true;
  cv_.NotifyAll();
}

void ObjectClient::SetSelf(const std::string& address) {
  MutexLock lock(&mu_);
  self_ = address;
}

void ObjectClient::SetNode(const std::string& node_address) {
  MutexLock lock(&mu_);
  if (node_ != node_address) freed_.clear();
  node_ = node_address;
}

bool ObjectClient::available() const {
  MutexLock lock(&mu_);
  return !node_.empty() && !closed_;
}

bool ObjectClient::TryAttach(const std::string& node_address, const std::string& path,
                             const std::string& tag) {
  auto arena = ShmArena::Attach(path, tag);
  if (!arena.ok()) return false;
  MutexLock lock(&mu_);
  if (!arena_) arena_ = std::move(*arena);
  node_ = node_address;
  return true;
}

Result<char*> ObjectClient::ArenaFor(const proto::ObjectStoreReplyMsg& reply) {
  MutexLock lock(&mu_);
  if (!arena_) {
    auto arena = ShmArena::Attach(reply.arena_path, reply.arena_tag);
    if (!arena.ok()) {
      return Status::Unavailable("cannot map the node's object store: " + arena.status().message());
    }
    arena_ = std::move(*arena);
  }
  if (reply.offset > arena_->capacity() || reply.size > arena_->capacity() - reply.offset) {
    return Status::Internal("the node gave a region outside its object store");
  }
  return arena_->data() + reply.offset;
}

Result<proto::ObjectStoreReplyMsg> ObjectClient::Call(MsgType type, proto::ObjectStoreMsg msg,
                                                      int timeout_ms) {
  std::string node;
  {
    MutexLock lock(&mu_);
    if (node_.empty() || closed_) return Status::Unavailable("no object store on this node");
    node = node_;
    msg.request_id = next_request_++;
    msg.reply_to = self_;
    waiting_[msg.request_id];
  }
  uint64_t request = msg.request_id;
  Status sent = outbox_.TrySend(node, type, msg);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  MutexLock lock(&mu_);
  auto it = waiting_.find(request);
  if (sent.ok()) {
    while (!it->second && !closed_ && cv_.WaitUntil(&mu_, deadline)) {
    }
  }
  std::optional<proto::ObjectStoreReplyMsg> reply = std::move(it->second);
  waiting_.erase(it);
  if (!sent.ok()) return sent;
  if (!reply) {
    return Status::Timeout(std::string("the node did not answer ") + proto::TypeName(type) +
                           " within " + std::to_string(timeout_ms) + " ms");
  }
  return std::move(*reply);
}

void ObjectClient::OnReply(const proto::ObjectStoreReplyMsg& reply) {
  MutexLock lock(&mu_);
  auto it = waiting_.find(reply.request_id);
  if (it == waiting_.end()) return;  // its caller gave up
  it->second = reply;
  cv_.NotifyAll();
}

Result<ObjectRegion> ObjectClient::Create(const ObjectId& id, uint64_t size,
                                          const std::string& owner) {
  proto::ObjectStoreMsg m;
  m.object_id = id.Binary();
  m.size = size;
  m.owner = owner;
  {
    MutexLock lock(&mu_);
    m.freed.assign(freed_.begin(), freed_.end());
    freed_.clear();
  }
  auto reply = Call(MsgType::kObjectCreate, m, DefaultDeadlineMs(0));
  if (!reply.ok()) return reply.status();
  if (!reply->ok) {
    if (reply->error_kind == proto::ErrorKind::kObjectStoreFullError)
      return Status::Unavailable(reply->message);
    return Status::Internal(reply->message);
  }
  if (reply->size != size) return Status::Internal("the node gave a region of the wrong size");
  auto data = ArenaFor(*reply);
  if (!data.ok()) return data.status();
  return ObjectRegion{*data, size, reply->location};
}

void ObjectClient::Seal(const ObjectId& id) {
  std::string node, self;
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    node = node_;
    self = self_;
  }
  proto::ObjectStoreMsg m;
  m.object_id = id.Binary();
  m.reply_to = self;
  outbox_.Send(node, MsgType::kObjectSeal, m);
}

Result<std::shared_ptr<const MappedObject>> ObjectClient::Open(
    const ObjectId& id, const proto::ObjectLocationMsg& location, int timeout_ms) {
  {
    MutexLock lock(&mu_);
    auto it = open_.find(id);
    if (it != open_.end()) {
      if (auto open = it->second.lock()) return open;
    }
  }
  proto::ObjectStoreMsg m;
  m.object_id = id.Binary();
  m.size = location.size;
  m.source = location;
  int deadline = timeout_ms >= 0 ? timeout_ms : DefaultDeadlineMs(location.size);
  auto reply = Call(MsgType::kObjectOpen, m, deadline);
  // A spill file that went between the reply and the read: the object was restored (ask
  // again: it is in the store now) or freed (the node then says so). Bounded.
  for (int again = 0; reply.ok() && reply->ok && !reply->spill_file.empty(); ++again) {
    auto spilled = ReadSpilled(id, *reply, location.size);
    if (spilled.ok() || spilled.status().code() != StatusCode::kNotFound || again == 3)
      return spilled;
    reply = Call(MsgType::kObjectOpen, m, deadline);
  }
  if (!reply.ok()) return reply.status();
  if (!reply->ok) return Status::NotFound(reply->message);
  if (reply->size != location.size) {
    Release(id);
    return Status::Internal("the node's copy of object " + id.Hex() + " has the wrong size");
  }
  auto data = ArenaFor(*reply);
  if (!data.ok()) {
    Release(id);
    return data.status();
  }
  auto mapped = std::make_shared<const MappedObject>(shared_from_this(), id, *data, reply->size);
  std::shared_ptr<const MappedObject> earlier;
  {
    MutexLock lock(&mu_);
    auto& slot = open_[id];
    earlier = slot.lock();
    if (!earlier) slot = mapped;
  }
  // Another thread opened it meanwhile: `mapped` releases its own pin as it goes (after the
  // lock, which its release takes).
  return earlier ? earlier : mapped;
}

Result<std::shared_ptr<const MappedObject>> ObjectClient::ReadSpilled(
    const ObjectId& id, const proto::ObjectStoreReplyMsg& reply, uint64_t size) {
  if (reply.size != size)
    return Status::Internal("the node's copy of object " + id.Hex() + " has the wrong size");
  // The node names a file of its own spill directory: <dir>/<this object's id>.
  std::filesystem::path path(reply.spill_file);
  if (!path.is_absolute() || path.filename() != id.Hex() ||
      reply.spill_file.find("/../") != std::string::npos) {
    return Status::Internal("the node named a bad spill file for object " + id.Hex() + ": " +
                            reply.spill_file);
  }
  auto bytes = ReadSpillFile(reply.spill_file, reply.size);
  if (!bytes.ok()) {
    std::string m = "object " + id.Hex() + " lost: spill file " + reply.spill_file + ": " +
                    bytes.status().message();
    return bytes.status().code() == StatusCode::kNotFound ? Status::NotFound(m)
                                                          : Status::Internal(m);
  }
  return std::make_shared<const MappedObject>(id, std::move(*bytes));
}

void ObjectClient::Release(const ObjectId& id) {
  std::string node, self;
  {
    MutexLock lock(&mu_);
    auto it = open_.find(id);
    if (it != open_.end() && it->second.expired()) open_.erase(it);
    if (closed_) return;
    node = node_;
    self = self_;
  }
  proto::ObjectStoreMsg m;
  m.object_id = id.Binary();
  m.reply_to = self;
  outbox_.Send(node, MsgType::kObjectRelease, m);
}

void ObjectClient::Free(const ObjectId& id, const proto::ObjectLocationMsg& location) {
  if (location.node_address.empty()) return;
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    if (location.node_address == node_) {
      freed_.push_back(id.Binary());
      if (freed_.size() > proto::kMaxFreedPerCreate) freed_.pop_front();
    }
  }
  outbox_.Send(location.node_address, MsgType::kObjectFree, proto::ObjectFreeMsg{{id.Binary()}});
}

}  // namespace orrery::objects
