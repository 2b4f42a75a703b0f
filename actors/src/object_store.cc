#include "actors/src/object_store.h"

#include <chrono>

namespace orrery::runtime {

namespace {
void (*g_before_block)() = nullptr;
void (*g_after_block)() = nullptr;

// Frees the executor slot of the calling thread for the duration of a blocking wait. Must
// end with the store's mutex released: taking the slot back may wait for another call,
// which may need the store.
struct BlockScope {
  BlockScope() {
    if (g_before_block) g_before_block();
  }
  ~BlockScope() {
    if (g_after_block) g_after_block();
  }
};
}  // namespace

void ObjectStore::SetBlockHooks(void (*before)(), void (*after)()) {
  g_before_block = before;
  g_after_block = after;
}

bool ObjectStore::MarkPending(const ObjectId& id) {
  MutexLock lock(&mu_);
  Entry& e = entries_[id];
  if (e.state != Entry::kReferenced) return false;
  e.state = Entry::kPending;
  return true;
}

namespace {
// The callbacks deferred on this thread (ObjectStore::DeferCallbacks) and how many scopes
// defer them.
thread_local int t_defer_depth = 0;
thread_local std::vector<std::pair<ObjectStore::Callback, ObjectValue>> t_deferred;
}  // namespace

ObjectStore::DeferCallbacks::DeferCallbacks() { ++t_defer_depth; }

ObjectStore::DeferCallbacks::~DeferCallbacks() {
  if (--t_defer_depth > 0) return;
  // A callback may complete more objects: they join the list and run in this loop.
  ++t_defer_depth;
  while (!t_deferred.empty()) {
    auto batch = std::move(t_deferred);
    t_deferred.clear();
    for (auto& [cb, value] : batch) cb(value);
  }
  --t_defer_depth;
}

std::shared_ptr<const proto::ObjectLocationMsg> ObjectStore::EraseLocked(
    std::unordered_map<ObjectId, Entry, IdHash>::iterator it) {
  std::shared_ptr<const proto::ObjectLocationMsg> loc;
  if (it->second.owned_location) loc = it->second.value.location;
  entries_.erase(it);
  return loc;
}

void ObjectStore::RunFreeHook(const ObjectId& id,
                              const std::shared_ptr<const proto::ObjectLocationMsg>& loc) {
  if (loc && free_hook_) free_hook_(id, *loc);
}

void ObjectStore::Complete(const ObjectId& id, ObjectValue value, bool owned) {
  std::vector<Callback> callbacks;
  std::shared_ptr<const proto::ObjectLocationMsg> to_free;
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      // Nobody holds a ref any more: an owned store copy goes at once.
      if (owned && value.location) to_free = value.location;
    } else if (it->second.state != Entry::kReady) {
      Entry& e = it->second;
      e.state = Entry::kReady;
      e.value = value;
      e.owned_location = owned && value.location != nullptr;
      callbacks.swap(e.callbacks);
      if (e.refs == 0 && !e.pinned) to_free = EraseLocked(it);
    }
  }
  RunFreeHook(id, to_free);
  cv_.NotifyAll();
  if (t_defer_depth > 0) {
    for (auto& cb : callbacks) t_deferred.emplace_back(std::move(cb), value);
    return;
  }
  for (auto& cb : callbacks) cb(value);
}

void ObjectStore::PutValue(const ObjectId& id, std::shared_ptr<const std::string> bytes) {
  Complete(id, ObjectValue{std::move(bytes), nullptr, nullptr});
}

void ObjectStore::PutError(const ObjectId& id, ObjectError error) {
  Complete(id,
           ObjectValue{nullptr, nullptr, std::make_shared<const ObjectError>(std::move(error))});
}

void ObjectStore::PutLocation(const ObjectId& id, proto::ObjectLocationMsg location, bool owned) {
  Complete(
      id,
      ObjectValue{nullptr, std::make_shared<const proto::ObjectLocationMsg>(std::move(location)),
                  nullptr},
      owned);
}

std::vector<std::pair<ObjectId, proto::ObjectLocationMsg>> ObjectStore::OwnedLocations() {
  std::vector<std::pair<ObjectId, proto::ObjectLocationMsg>> out;
  MutexLock lock(&mu_);
  for (const auto& [id, e] : entries_)
    if (e.owned_location && e.value.location) out.emplace_back(id, *e.value.location);
  return out;
}

ObjectStore::Presence ObjectStore::Lookup(const ObjectId& id) {
  MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return Presence::kAbsent;
  switch (it->second.state) {
    case Entry::kReferenced:
      return Presence::kReferenced;
    case Entry::kPending:
      return Presence::kPending;
    case Entry::kReady:
      return Presence::kReady;
  }
  return Presence::kAbsent;
}

bool ObjectStore::DoneLocked(const ObjectId& id) {
  auto it = entries_.find(id);
  return it == entries_.end() || it->second.state == Entry::kReady;
}

Result<ObjectValue> ObjectStore::ValueLocked(const ObjectId& id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return Status::NotFound("object " + id.Hex() + " is not in the store");
  return it->second.value;
}

bool ObjectStore::CountReadyLocked(const std::vector<ObjectId>& ids, int num_returns,
                                   std::vector<bool>* ready) {
  int n = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = entries_.find(ids[i]);
    (*ready)[i] = it != entries_.end() && it->second.state == Entry::kReady;
    n += (*ready)[i];
  }
  return n >= num_returns;
}

Result<ObjectValue> ObjectStore::Get(const ObjectId& id, int timeout_ms) {
  {
    MutexLock lock(&mu_);
    if (DoneLocked(id)) return ValueLocked(id);
  }
  bool in_time = true;
  {
    BlockScope scope;
    MutexLock wait_lock(&mu_);
    if (timeout_ms < 0) {
      while (!DoneLocked(id)) cv_.Wait(&mu_);
    } else {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
      while (!DoneLocked(id) && cv_.WaitUntil(&mu_, deadline)) {
      }
      in_time = DoneLocked(id);
    }
  }
  if (!in_time) {
    return Status::Timeout("object " + id.Hex() + " was not ready within " +
                           std::to_string(timeout_ms) + " ms");
  }
  MutexLock lock(&mu_);
  return ValueLocked(id);
}

std::vector<bool> ObjectStore::Wait(const std::vector<ObjectId>& ids, int num_returns,
                                    int timeout_ms) {
  std::vector<bool> out(ids.size(), false);
  bool enough;
  {
    MutexLock lock(&mu_);
    enough = CountReadyLocked(ids, num_returns, &out);
  }
  if (!enough) {
    {
      BlockScope scope;
      MutexLock wait_lock(&mu_);
      if (timeout_ms < 0) {
        while (!CountReadyLocked(ids, num_returns, &out)) cv_.Wait(&mu_);
      } else {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        while (!CountReadyLocked(ids, num_returns, &out) && cv_.WaitUntil(&mu_, deadline)) {
        }
      }
    }
    MutexLock lock(&mu_);
    CountReadyLocked(ids, num_returns, &out);  // what is ready now, after the wait for the slot
  }
  // Report exactly num_returns ready ones at most (the first in order), as Ray does.
  int seen = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] && ++seen > num_returns) out[i] = false;
  }
  return out;
}

void ObjectStore::OnReady(const ObjectId& id, Callback cb) {
  ObjectValue value;
  {
    MutexLock lock(&mu_);
    Entry& e = entries_[id];
    if (e.state != Entry::kReady) {
      e.callbacks.push_back(std::move(cb));
      return;
    }
    value = e.value;
  }
  cb(value);
}

void ObjectStore::AddRef(const ObjectId& id) {
  MutexLock lock(&mu_);
  ++entries_[id].refs;
}

void ObjectStore::RemoveRef(const ObjectId& id) {
  std::shared_ptr<const proto::ObjectLocationMsg> to_free;
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    Entry& e = it->second;
    if (--e.refs <= 0 && !e.pinned && e.callbacks.empty()) to_free = EraseLocked(it);
  }
  RunFreeHook(id, to_free);
}

void ObjectStore::Pin(const ObjectId& id) {
  MutexLock lock(&mu_);
  entries_[id].pinned = true;
}

size_t ObjectStore::Size() {
  MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace orrery::runtime
