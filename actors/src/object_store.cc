#include "actors/src/object_store.h"

#include <chrono>

#include "actors/src/wait_spin.h"
#include "core/internal/clock.h"

namespace orrery::runtime {

namespace {
void (*g_before_block)() = nullptr;
void (*g_after_block)() = nullptr;
}  // namespace

ObjectStore::BlockScope::BlockScope() {
  if (g_before_block) g_before_block();
}
ObjectStore::BlockScope::~BlockScope() {
  if (g_after_block) g_after_block();
}

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

ObjectStore::Released ObjectStore::EraseLocked(Entries::iterator it) {
  Entry& e = it->second;
  Released r{it->first, nullptr, {}, {}};
  if (e.sharing) {
    r.borrowed_from = std::move(e.sharing->borrowed_from);
    r.contained = std::move(e.sharing->contained);
  }
  if (e.owned_location) r.location = e.value.location;
  entries_.erase(it);
  return r;
}

std::optional<ObjectStore::Released> ObjectStore::MaybeReleaseLocked(Entries::iterator it,
                                                                     double now) {
  Entry& e = it->second;
  if (e.refs > 0 || e.pinned || !e.callbacks.empty() || HasBorrowers(e)) {
    e.release_at = 0;
    return std::nullopt;
  }
  if (e.shared) {
    if (now == 0) now = MonotonicSeconds();
    if (e.release_at == 0) {
      e.release_at = now + kShareGraceS;
      in_grace_.insert(it->first);
    }
    if (now < e.release_at) return std::nullopt;
  }
  return EraseLocked(it);
}

void ObjectStore::Finish(const std::optional<Released>& r) {
  if (!r) return;
  if (r->location && free_hook_) free_hook_(r->id, *r->location);
  if (!r->borrowed_from.empty() && borrow_hook_) borrow_hook_(r->id, r->borrowed_from, -1);
}

void ObjectStore::Complete(const ObjectId& id, ObjectValue value, bool owned) {
  std::vector<Callback> callbacks;
  std::optional<Released> released;
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      // Nobody holds a ref any more: an owned store copy goes at once.
      if (owned && value.location) released = Released{id, value.location, {}, {}};
    } else if (it->second.state == Entry::kReady) {
      // Completed already (a call cancelled by its caller, then answered with a result kept
      // in a store): an owned copy that the entry does not hold goes at once.
      if (owned && value.location && !it->second.value.location)
        released = Released{id, value.location, {}, {}};
    } else {
      Entry& e = it->second;
      e.state = Entry::kReady;
      e.value = value;
      e.owned_location = owned && value.location != nullptr;
      callbacks.swap(e.callbacks);
      released = MaybeReleaseLocked(it);
    }
  }
  Finish(released);
  completions_.fetch_add(1, std::memory_order_release);
  cv_.NotifyAll();
  if (completion_hook_) completion_hook_(id, value);
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
  // The timeout counts from here: the watch is part of it.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  internal::WaitSpin spin(timeout_ms < 0 ? -1 : timeout_ms * 1000ll);
  if (spin.Spin(completions_, [&] {
        MutexLock lock(&mu_);
        return DoneLocked(id);
      })) {
    MutexLock lock(&mu_);
    return ValueLocked(id);
  }
  bool in_time = true;
  {
    BlockScope scope;
    MutexLock wait_lock(&mu_);
    if (timeout_ms < 0) {
      while (!DoneLocked(id)) cv_.Wait(&mu_);
    } else {
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
    // The timeout counts from here: the watch is part of it.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    internal::WaitSpin spin(timeout_ms < 0 ? -1 : timeout_ms * 1000ll);
    bool seen = spin.Spin(completions_, [&] {
      MutexLock lock(&mu_);
      return CountReadyLocked(ids, num_returns, &out);
    });
    if (!seen) WaitForReady(ids, num_returns, timeout_ms, deadline, &out);
  }
  // Report exactly num_returns ready ones at most (the first in order), as Ray does.
  int seen = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] && ++seen > num_returns) out[i] = false;
  }
  return out;
}

void ObjectStore::WaitForReady(const std::vector<ObjectId>& ids, int num_returns, int timeout_ms,
                               std::chrono::steady_clock::time_point deadline,
                               std::vector<bool>* out) {
  {
    BlockScope scope;
    MutexLock wait_lock(&mu_);
    if (timeout_ms < 0) {
      while (!CountReadyLocked(ids, num_returns, out)) cv_.Wait(&mu_);
    } else {
      while (!CountReadyLocked(ids, num_returns, out) && cv_.WaitUntil(&mu_, deadline)) {
      }
    }
  }
  MutexLock lock(&mu_);
  CountReadyLocked(ids, num_returns, out);  // what is ready now, after the wait for the slot
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

void ObjectStore::AddRef(const ObjectId& id, const std::string& owner) {
  bool tell = false;
  {
    MutexLock lock(&mu_);
    Entry& e = entries_[id];
    ++e.refs;
    e.release_at = 0;
    if (!owner.empty() && !Borrowed(e)) {
      SharingOf(e).borrowed_from = owner;
      tell = true;
    }
  }
  if (tell && borrow_hook_) borrow_hook_(id, owner, +1);
}

void ObjectStore::RemoveRef(const ObjectId& id) {
  std::optional<Released> released;
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    --it->second.refs;
    released = MaybeReleaseLocked(it);
  }
  Finish(released);
}

void ObjectStore::Pin(const ObjectId& id) {
  MutexLock lock(&mu_);
  entries_[id].pinned = true;
}

void ObjectStore::MarkShared(const ObjectId& id) {
  MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it != entries_.end()) it->second.shared = true;
}

void ObjectStore::PinContained(const ObjectId& id) {
  MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.sharing) return;
  for (const auto& ref : it->second.sharing->contained) entries_[ref->id()].pinned = true;
}

void ObjectStore::AttachContained(const ObjectId& id,
                                  std::vector<std::shared_ptr<const internal::RefHolder>> refs) {
  if (refs.empty()) return;
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it != entries_.end()) {
      auto& c = SharingOf(it->second).contained;
      c.insert(c.end(), std::make_move_iterator(refs.begin()), std::make_move_iterator(refs.end()));
      return;
    }
  }
  // The value is gone already: its refs are dropped here, without the lock.
}

Status ObjectStore::AddBorrower(const ObjectId& id, const std::string& borrower, int delta) {
  std::optional<Released> released;
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end() || Borrowed(it->second)) {
      return Status::NotFound("object " + id.Hex() + " is not owned here (or is gone)");
    }
    Entry& e = it->second;
    auto& borrowers = SharingOf(e).borrowers;
    auto b = borrowers.find(borrower);
    if (b == borrowers.end()) {
      if (borrowers.size() >= kMaxBorrowers) {
        return Status::Unavailable("object " + id.Hex() + " has " + std::to_string(kMaxBorrowers) +
                                   " borrowers already");
      }
      b = borrowers.emplace(borrower, 0).first;
    }
    // A borrower's -1 may overtake its +1 (they can leave on different sockets): the count
    // is signed and the borrower counts as holding refs until it is back to zero.
    b->second += delta;
    if (b->second == 0) borrowers.erase(b);
    e.shared = true;
    released = MaybeReleaseLocked(it);
  }
  Finish(released);
  return Status::Ok();
}

std::set<std::string> ObjectStore::Borrowers() {
  std::set<std::string> out;
  MutexLock lock(&mu_);
  for (const auto& [id, e] : entries_) {
    if (!HasBorrowers(e)) continue;
    for (const auto& [borrower, count] : e.sharing->borrowers) out.insert(borrower);
  }
  return out;
}

void ObjectStore::DropBorrower(const std::string& borrower) {
  std::vector<Released> released;
  {
    MutexLock lock(&mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto next = std::next(it);
      if (HasBorrowers(it->second) && it->second.sharing->borrowers.erase(borrower)) {
        if (auto r = MaybeReleaseLocked(it)) released.push_back(std::move(*r));
      }
      it = next;
    }
  }
  for (const auto& r : released) Finish(r);
}

void ObjectStore::ReleaseExpired(double now) {
  std::vector<Released> released;
  {
    MutexLock lock(&mu_);
    std::unordered_set<ObjectId, IdHash> waiting;
    for (const ObjectId& id : in_grace_) {
      auto it = entries_.find(id);
      if (it == entries_.end() || it->second.release_at == 0) continue;  // gone, or held again
      if (now < it->second.release_at) {
        waiting.insert(id);
        continue;
      }
      if (auto r = MaybeReleaseLocked(it, now)) released.push_back(std::move(*r));
    }
    in_grace_.swap(waiting);
  }
  for (const auto& r : released) Finish(r);
}

std::vector<std::pair<ObjectId, std::string>> ObjectStore::TakeBorrowed() {
  std::vector<std::pair<ObjectId, std::string>> out;
  MutexLock lock(&mu_);
  for (auto& [id, e] : entries_) {
    if (!Borrowed(e)) continue;
    out.emplace_back(id, std::move(e.sharing->borrowed_from));
    e.sharing->borrowed_from.clear();
  }
  return out;
}

size_t ObjectStore::Size() {
  MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace orrery::runtime
