#include "objects/internal/node_object_plane.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "core/internal/log.h"
#include "objects/internal/object_transfer.h"
#include "objects/internal/shm_arena.h"
#include "objects/internal/spill_file.h"
#include "objects/src/node_objects.h"

namespace orrery::objects {

using proto::MsgType;

namespace {
// The holder name a node uses for its own pins: a pull writing a copy, the data server
// reading one for a peer.
constexpr const char* kPullHolder = "node:pull";
constexpr const char* kServeHolder = "node:serve";
constexpr int kUnsealedServeWaitS = 5;
// Pulls running at once (a thread each); an open past it fails rather than queue unbounded.
constexpr int kMaxPulls = 64;

ObjectId IdOf(const std::string& binary) { return ObjectId(UniqueId::FromBinary(binary)); }

// Test hook: says a transfer is being served (creates `path`.serving), then waits while
// `path` exists (at most 60 s).
void HoldForTest(const std::string& path) {
  if (FILE* f = std::fopen((path + ".serving").c_str(), "w")) std::fclose(f);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (access(path.c_str(), F_OK) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}
}  // namespace

uint64_t DefaultObjectStoreBytes(const std::string& shm_dir) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t bytes = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) * 3 / 10 : 1ull << 30;
  struct statvfs fs {};
  if (statvfs(shm_dir.c_str(), &fs) == 0) {
    uint64_t room = uint64_t(fs.f_bavail) * fs.f_frsize;
    // Leave a tenth of the directory for others (and the arena's header).
    bytes = std::min(bytes, room / 10 * 9);
  }
  return std::max<uint64_t>(bytes, 64ull << 20);
}

NodeObjectPlane::NodeObjectPlane(ObjectPlaneOptions options, transport::Inbox& inbox)
    : options_(std::move(options)), inbox_(inbox) {
  tag_ = options_.node_id.Hex();
  arena_path_ = options_.shm_dir + "/orrery-" + tag_;
}

NodeObjectPlane::~NodeObjectPlane() { Stop(); }

Status NodeObjectPlane::Start() {
  // What nodes of this host that were killed left: their arenas, which hold memory until
  // removed, and their spill folders.
  for (const std::string& tag : ShmArena::RemoveAbandoned(options_.shm_dir)) {
    std::error_code ec;
    std::filesystem::remove_all(options_.spill_root + "/node-" + tag, ec);
    LOG_INFO("node: removed the object store " + options_.shm_dir + "/orrery-" + tag +
             " and its spill folder, left by a node that is gone");
  }
  NodeObjects::Options o;
  o.arena_path = arena_path_;
  o.capacity = options_.capacity ? options_.capacity : DefaultObjectStoreBytes(options_.shm_dir);
  o.spill_dir = options_.spill_root + "/node-" + tag_;
  o.tag = tag_;
  auto objects = NodeObjects::Create(o);
  if (!objects.ok()) return objects.status();
  {
    MutexLock lock(&mu_);
    objects_ = std::move(*objects);
  }
  // Orrery's own tests hold a transfer mid-way to kill its source (docs/testing.md).
  const char* hold = std::getenv("ORRERY_TEST_OBJECT_SERVE_HOLD");
  server_ = std::make_unique<ObjectServer>(
      [this, hold = std::string(hold ? hold : "")](const ObjectId& id) -> Result<ObjectBytes> {
        if (!hold.empty()) HoldForTest(hold);
        MutexLock lock(&mu_);
        // An object still being written is waited for: its creator's seal is on its way, and a
        // reader elsewhere can hear of the object (from a stream, say) before this node does.
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(kUnsealedServeWaitS);
        while (!stopping_ && objects_ && unsealed_.count(id) &&
               unsealed_done_.WaitUntil(&mu_, until)) {
        }
        if (!objects_) return Status::NotFound("the node is stopping");
        auto loc = objects_->Open(id, kServeHolder);
        if (!loc.ok()) return loc.status();
        if (!loc->spill_file.empty()) {  // no room to restore it: served from its file
          auto bytes = ReadSpillFile(loc->spill_file, loc->size);
          if (!bytes.ok()) {
            return Status::NotFound("object " + id.Hex() + " lost: spill file " + loc->spill_file +
                                    ": " + bytes.status().message());
          }
          return ObjectBytes{(*bytes)->data(), loc->size, *bytes};
        }
        // Released by whichever thread drops the last copy of the pin.
        std::shared_ptr<void> pin(nullptr, [this, id](void*) {
          MutexLock unpin(&mu_);
          if (objects_) objects_->Release(id, kServeHolder);
        });
        return ObjectBytes{objects_->arena().data() + loc->offset, loc->size, pin};
      },
      ProcessTransferKey());
  Status s = server_->Start(options_.bind_host, options_.advertise_host);
  if (!s.ok()) return s;
  LOG_INFO("object store: " + std::to_string(o.capacity >> 20) + " MiB at " + arena_path_ +
           ", spilling to " + o.spill_dir + ", data server " + server_->address());
  return Status::Ok();
}

void NodeObjectPlane::Stop() {
  stopping_ = true;
  {
    MutexLock lock(&mu_);
    unsealed_done_.NotifyAll();
  }
  if (server_) server_->Stop();
  MutexLock lock(&mu_);
  while (active_pulls_ > 0) pulls_done_.Wait(&mu_);
  objects_.reset();  // the arena file and the spill directory go with it
}

std::string NodeObjectPlane::data_address() const {
  return server_ ? server_->address() : std::string();
}

proto::ObjectLocationMsg NodeObjectPlane::LocationOf(uint64_t size) const {
  return proto::ObjectLocationMsg{inbox_.address(), data_address(), size};
}

proto::ObjectStoreReplyMsg NodeObjectPlane::ReplyTo(const proto::ObjectStoreMsg& m) const {
  proto::ObjectStoreReplyMsg r;
  r.request_id = m.request_id;
  r.arena_path = arena_path_;
  r.arena_tag = tag_;
  return r;
}

std::optional<Status> NodeObjectPlane::Handle(transport::Envelope& env) {
  using transport::DecodeAnd;
  switch (env.type) {
    case MsgType::kObjectCreate:
      return DecodeAnd<proto::ObjectStoreMsg>(env, [&](const auto& m) { OnCreate(m); });
    case MsgType::kObjectSeal:
      return DecodeAnd<proto::ObjectStoreMsg>(env, [&](const auto& m) { OnSeal(m); });
    case MsgType::kObjectOpen:
      return DecodeAnd<proto::ObjectStoreMsg>(env, [&](const auto& m) { OnOpen(m); });
    case MsgType::kObjectRelease:
      return DecodeAnd<proto::ObjectStoreMsg>(env, [&](const auto& m) { OnRelease(m); });
    case MsgType::kObjectFree:
      return DecodeAnd<proto::ObjectFreeMsg>(env, [&](const auto& m) { OnFree(m); });
    case MsgType::kObjectCopied:
      return DecodeAnd<proto::ObjectCopiedMsg>(env, [&](const auto& m) { OnCopied(m); });
    case MsgType::kListObjects:
      return DecodeAnd<proto::ListObjectsMsg>(env, [&](const auto& m) { OnList(m); });
    case MsgType::kPong: {
      proto::PingMsg m;
      if (Status s = env.Decode(&m); !s.ok()) return s;
      MutexLock lock(&mu_);
      if (!owners_.OnPong(m.request_id)) return std::nullopt;  // someone else's ping
      return Status::Ok();
    }
    default:
      return std::nullopt;
  }
}

void NodeObjectPlane::OnRelease(const proto::ObjectStoreMsg& m) {
  ObjectId id = IdOf(m.object_id);
  MutexLock lock(&mu_);
  if (!objects_) return;
  objects_->Release(id, m.reply_to);
  if (free_pending_.count(id) && objects_->Pins(id) == 0) FreeLocked(id);
}

void NodeObjectPlane::OnCopied(const proto::ObjectCopiedMsg& m) {
  ObjectId id = IdOf(m.object_id);
  MutexLock lock(&mu_);
  // Bounded by what this node holds: a copy of an object it has no primary of is ignored.
  if (objects_ && objects_->Contains(id) && copies_[id].size() < 4096)
    copies_[id].insert(m.node_address);
}

void NodeObjectPlane::OnCreate(const proto::ObjectStoreMsg& m) {
  proto::ObjectStoreReplyMsg r = ReplyTo(m);
  {
    MutexLock lock(&mu_);
    // What its sender freed before: its kObjectFree may come after this (another thread's).
    // Only what the sender owns: a create frees nothing of another process's.
    if (objects_) {
      size_t n = std::min(m.freed.size(), proto::kMaxFreedPerCreate);
      for (size_t i = 0; i < n; ++i) {
        const std::string& binary = m.freed[i];
        if (binary.size() == UniqueId::kSize && objects_->OwnerOf(IdOf(binary)) == m.reply_to)
          OnFreeLocked(binary);
      }
    }
    auto loc = objects_ ? objects_->Create(IdOf(m.object_id), m.size, m.owner, m.reply_to)
                        : Result<ObjectLocation>(Status::Unavailable("the node is stopping"));
    if (loc.ok()) {
      r.ok = true;
      r.offset = loc->offset;
      r.size = loc->size;
      r.location = LocationOf(m.size);
      unsealed_[IdOf(m.object_id)].creator = m.reply_to;
    } else {
      r.error_kind = loc.status().code() == StatusCode::kUnavailable
                         ? proto::ErrorKind::kObjectStoreFullError
                         : proto::ErrorKind::kError;
      r.message = loc.status().message();
    }
  }
  transport::Send(m.reply_to, MsgType::kObjectStoreReply, r);
}

void NodeObjectPlane::OnSeal(const proto::ObjectStoreMsg& m) {
  ObjectId id = IdOf(m.object_id);
  MutexLock lock(&mu_);
  if (!objects_) return;
  Status s = objects_->Seal(id, m.reply_to);
  if (!s.ok()) LOG_WARN("object seal: " + s.message());
  auto it = unsealed_.find(id);
  if (it != unsealed_.end()) {
    std::vector<proto::ObjectStoreMsg> waiters = std::move(it->second.waiters);
    unsealed_.erase(it);
    unsealed_done_.NotifyAll();
    for (const auto& w : waiters) ReplyOpenLocked(w);
  }
  // Freed while it was being written: now, or at its readers' last release.
  if (free_pending_.count(id) && objects_->Pins(id) == 0) FreeLocked(id);
}

void NodeObjectPlane::ReplyLost(const proto::ObjectStoreMsg& m, const std::string& message) const {
  proto::ObjectStoreReplyMsg r = ReplyTo(m);
  r.error_kind = proto::ErrorKind::kObjectLostError;
  r.message = message;
  transport::Send(m.reply_to, MsgType::kObjectStoreReply, r);
}

void NodeObjectPlane::ReplyOpenLocked(const proto::ObjectStoreMsg& m) {
  proto::ObjectStoreReplyMsg r = ReplyTo(m);
  ObjectId id = IdOf(m.object_id);
  auto loc = objects_ ? objects_->Open(id, m.reply_to)
                      : Result<ObjectLocation>(Status::NotFound("the node is stopping"));
  if (loc.ok()) {
    r.ok = true;
    r.offset = loc->offset;
    r.size = loc->size;
    r.spill_file = loc->spill_file;
  } else {
    r.error_kind = proto::ErrorKind::kObjectLostError;
    r.message = "object " + id.Hex() + " cannot be read on this node: " + loc.status().message();
  }
  transport::Send(m.reply_to, MsgType::kObjectStoreReply, r);
}

void NodeObjectPlane::OnOpen(const proto::ObjectStoreMsg& m) {
  ObjectId id = IdOf(m.object_id);
  MutexLock lock(&mu_);
  if (!objects_ || objects_->Contains(id) || free_pending_.count(id)) {
    ReplyOpenLocked(m);
    return;
  }
  if (auto unsealed = unsealed_.find(id); unsealed != unsealed_.end()) {
    if (unsealed->second.waiters.size() < 4096) {
      unsealed->second.waiters.push_back(m);
    } else {
      ReplyLost(m, "too many readers wait for object " + id.Hex());
    }
    return;
  }
  auto pull = pulls_.find(id);
  if (pull != pulls_.end()) {
    pull->second.waiters.push_back(m);
    return;
  }
  if (m.source.data_address.empty() || m.source.node_address == inbox_.address()) {
    ReplyOpenLocked(m);  // nowhere to pull from: answers that it is gone
    return;
  }
  StartPullLocked(id, m);
}

void NodeObjectPlane::StartPullLocked(const ObjectId& id, const proto::ObjectStoreMsg& m) {
  if (active_pulls_ >= kMaxPulls) {
    ReplyLost(m, "this node already pulls " + std::to_string(kMaxPulls) + " objects");
    return;
  }
  auto region = objects_->Create(id, m.source.size, m.owner, kPullHolder, /*primary=*/false);
  if (!region.ok()) {
    proto::ObjectStoreReplyMsg r = ReplyTo(m);
    r.error_kind = proto::ErrorKind::kObjectStoreFullError;
    r.message = "no room for a copy of object " + id.Hex() + ": " + region.status().message();
    transport::Send(m.reply_to, MsgType::kObjectStoreReply, r);
    return;
  }
  Pull& p = pulls_[id];
  p.waiters.push_back(m);
  p.source = m.source;
  p.owner = m.owner;
  char* dest = objects_->arena().data() + region->offset;
  ++active_pulls_;
  std::thread([this, id, source = m.source, dest] {
    PullOptions options;
    options.cancel = &stopping_;
    Status s =
        PullObject(source.data_address, id, source.size, dest, options, ProcessTransferKey());
    inbox_.Post([this, id, s] { PullDone(id, s); });
    MutexLock lock(&mu_);
    if (--active_pulls_ == 0) pulls_done_.NotifyAll();
  }).detach();
}

void NodeObjectPlane::PullDone(const ObjectId& id, Status status) {
  MutexLock lock(&mu_);
  auto it = pulls_.find(id);
  if (it == pulls_.end() || !objects_) return;
  Pull pull = std::move(it->second);
  pulls_.erase(it);
  if (status.ok()) status = objects_->Seal(id, kPullHolder);
  if (status.ok()) {
    transport::Send(pull.source.node_address, MsgType::kObjectCopied,
                    proto::ObjectCopiedMsg{id.Binary(), inbox_.address()});
    for (const auto& w : pull.waiters) ReplyOpenLocked(w);
    return;
  }
  objects_->Abort(id);
  LOG_WARN("pulling object " + id.Hex() + " from " + pull.source.data_address +
           " failed: " + status.message());
  for (const auto& w : pull.waiters) {
    ReplyLost(w, "object " + id.Hex() + " could not be pulled from the node at " +
                     pull.source.node_address + ": " + status.message());
  }
}

void NodeObjectPlane::FreeLocked(const ObjectId& id) {
  free_pending_.erase(id);
  objects_->Free(id);
  auto copies = copies_.find(id);
  if (copies == copies_.end()) return;
  for (const auto& node : copies->second)
    transport::Send(node, MsgType::kObjectFree, proto::ObjectFreeMsg{{id.Binary()}});
  copies_.erase(copies);
}

void NodeObjectPlane::OnFree(const proto::ObjectFreeMsg& m) {
  MutexLock lock(&mu_);
  if (!objects_) return;
  for (const auto& binary : m.object_ids) OnFreeLocked(binary);
}

void NodeObjectPlane::OnFreeLocked(const std::string& binary) {
  if (binary.size() != UniqueId::kSize) return;
  ObjectId id = IdOf(binary);
  if (pulls_.count(id)) {  // its readers get it; it goes at their last release
    free_pending_.insert(id);
    return;
  }
  if (!objects_->Contains(id)) {
    // Still being written (its seal and this free came on different sockets): at its seal.
    if (unsealed_.count(id)) {
      free_pending_.insert(id);
      return;
    }
    copies_.erase(id);  // gone already (this free came twice: with a Create too)
    return;
  }
  // A reader still has it open: it goes at the last release.
  if (objects_->Pins(id) > 0) {
    free_pending_.insert(id);
  } else {
    FreeLocked(id);
  }
}

void NodeObjectPlane::OnProcessExit(const std::string& address) {
  MutexLock lock(&mu_);
  if (!objects_) return;
  objects_->ReleaseHolder(address);
  owners_.Forget(address);
  for (auto it = unsealed_.begin(); it != unsealed_.end();) {
    if (it->second.creator != address) {
      ++it;
      continue;
    }
    objects_->Abort(it->first);
    for (const auto& w : it->second.waiters)
      ReplyLost(w, "object " + it->first.Hex() + " was never written: its writer exited");
    it = unsealed_.erase(it);
    unsealed_done_.NotifyAll();
  }
  FreeOwnedLocked(address);
  for (auto it = free_pending_.begin(); it != free_pending_.end();) {
    ObjectId id = *it++;
    if (objects_->Pins(id) == 0) FreeLocked(id);
  }
}

void NodeObjectPlane::FreeOwnedLocked(const std::string& owner) {
  for (const auto& id : objects_->FreeOwnedBy(owner)) {
    free_pending_.erase(id);
    auto copies = copies_.find(id);
    if (copies == copies_.end()) continue;
    for (const auto& node : copies->second)
      transport::Send(node, MsgType::kObjectFree, proto::ObjectFreeMsg{{id.Binary()}});
    copies_.erase(copies);
  }
}

void NodeObjectPlane::Tick(double now) {
  MutexLock lock(&mu_);
  if (!objects_ || !owners_.Due(now)) return;
  std::set<std::string> owners;
  for (const auto& o : objects_->List()) owners.insert(o.owner);
  std::vector<std::string> dead;
  for (const auto& ping : owners_.Tick(now, owners, &dead)) {
    transport::Send(ping.address, MsgType::kPing,
                    proto::PingMsg{ping.request_id, inbox_.address()});
  }
  for (const auto& owner : dead) {
    LOG_INFO("freeing the objects of " + owner +
             ": it is gone (nothing listens there, or no answer for " +
             std::to_string(int(kOwnerDeadS)) + " s)");
    FreeOwnedLocked(owner);
  }
}

proto::ObjectStoreUsageMsg NodeObjectPlane::Usage() const {
  MutexLock lock(&mu_);
  if (!objects_) return {};
  NodeObjectsUsage u = objects_->Usage();
  return proto::ObjectStoreUsageMsg{u.capacity, u.used_bytes, u.spilled_bytes, u.num_objects};
}

void NodeObjectPlane::OnList(const proto::ListObjectsMsg& m) {
  proto::ListObjectsReplyMsg r;
  r.request_id = m.request_id;
  r.node_id = options_.node_id.Hex();
  {
    MutexLock lock(&mu_);
    if (objects_) {
      NodeObjectsUsage u = objects_->Usage();
      r.usage = {u.capacity, u.used_bytes, u.spilled_bytes, u.num_objects};
      for (const auto& o : objects_->List()) {
        if (r.objects.size() >= proto::kMaxListedObjects) {
          r.truncated = true;
          break;
        }
        r.objects.push_back({o.id.Hex(), o.size, o.owner, o.spilled, o.primary, o.pins});
      }
    }
  }
  transport::Send(m.reply_to, MsgType::kListObjectsReply, r);
}

}  // namespace orrery::objects
