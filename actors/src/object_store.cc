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
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entries_[id];
  if (e.state != Entry::kReferenced) return false;
  e.state = Entry::kPending;
  return true;
}

void ObjectStore::Complete(const ObjectId& id, ObjectValue value) {
  std::vector<Callback> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;  // nobody holds a ref any more
    Entry& e = it->second;
    if (e.state == Entry::kReady) return;
    e.state = Entry::kReady;
    e.value = value;
    callbacks.swap(e.callbacks);
    if (e.refs == 0 && !e.pinned) entries_.erase(it);
  }
  cv_.notify_all();
  for (auto& cb : callbacks) cb(value);
}

void ObjectStore::PutValue(const ObjectId& id, std::shared_ptr<const std::string> bytes) {
  Complete(id, ObjectValue{std::move(bytes), nullptr});
}

void ObjectStore::PutError(const ObjectId& id, ObjectError error) {
  Complete(id, ObjectValue{nullptr, std::make_shared<const ObjectError>(std::move(error))});
}

ObjectStore::Presence ObjectStore::Lookup(const ObjectId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return Presence::kAbsent;
  switch (it->second.state) {
    case Entry::kReferenced: return Presence::kReferenced;
    case Entry::kPending: return Presence::kPending;
    case Entry::kReady: return Presence::kReady;
  }
  return Presence::kAbsent;
}

Result<ObjectValue> ObjectStore::Get(const ObjectId& id, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [&] {
    auto it = entries_.find(id);
    return it == entries_.end() || it->second.state == Entry::kReady;
  };
  if (!ready()) {
    lock.unlock();
    bool in_time = true;
    {
      BlockScope scope;
      std::unique_lock<std::mutex> wait_lock(mu_);
      if (timeout_ms < 0) {
        cv_.wait(wait_lock, ready);
      } else {
        in_time = cv_.wait_for(wait_lock, std::chrono::milliseconds(timeout_ms), ready);
      }
    }
    if (!in_time) {
      return Status::Timeout("object " + id.Hex() + " was not ready within " + std::to_string(timeout_ms) + " ms");
    }
    lock.lock();
  }
  auto it = entries_.find(id);
  if (it == entries_.end()) return Status::NotFound("object " + id.Hex() + " is not in the store");
  return it->second.value;
}

std::vector<bool> ObjectStore::Wait(const std::vector<ObjectId>& ids, int num_returns, int timeout_ms) {
  std::vector<bool> out(ids.size(), false);
  std::unique_lock<std::mutex> lock(mu_);
  auto count = [&] {
    int n = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = entries_.find(ids[i]);
      out[i] = it != entries_.end() && it->second.state == Entry::kReady;
      n += out[i];
    }
    return n >= num_returns;
  };
  if (!count()) {
    lock.unlock();
    {
      BlockScope scope;
      std::unique_lock<std::mutex> wait_lock(mu_);
      if (timeout_ms < 0) {
        cv_.wait(wait_lock, count);
      } else {
        cv_.wait_for(wait_lock, std::chrono::milliseconds(timeout_ms), count);
      }
    }
    lock.lock();
    count();  // what is ready now, after the wait for the slot
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
    std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  ++entries_[id].refs;
}

void ObjectStore::RemoveRef(const ObjectId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  if (--e.refs <= 0 && !e.pinned && e.callbacks.empty()) entries_.erase(it);
}

void ObjectStore::Pin(const ObjectId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_[id].pinned = true;
}

size_t ObjectStore::Size() {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace orrery::runtime
