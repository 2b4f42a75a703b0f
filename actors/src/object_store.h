// The process-local object store: values (msgpack bytes) and errors of the objects this
// process owns or has fetched, keyed by ObjectId.
//
// Waits block the calling thread; inside a worker they first tell the executor (through the
// block hooks) so the actor keeps serving while one of its methods waits.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/internal/error_kind.h"
#include "core/internal/protocol_objects.h"
#include "core/internal/thread_annotations.h"
#include "orrery/api/object_ref.h"
#include "orrery/ids.h"
#include "orrery/status.h"

namespace orrery::runtime {

struct ObjectError {
  proto::ErrorKind kind = proto::ErrorKind::kError;  // kRemoteError, kActorDiedError, ...
  std::string type;                                  // RemoteError: the user's exception type
  std::string message;
  std::string function;
  std::string where;
};

// A ready object: its bytes (kept in this process), or where a node's store keeps them (a
// value above kInlineObjectMaxBytes), or the error that its producer reported.
struct ObjectValue {
  std::shared_ptr<const std::string> bytes;                  // inline value
  std::shared_ptr<const proto::ObjectLocationMsg> location;  // value in a node's store
  std::shared_ptr<const ObjectError> error;                  // set on failure
  bool ok() const { return bytes != nullptr || location != nullptr; }
};

class ObjectStore {
 public:
  using Callback = std::function<void(const ObjectValue&)>;

  // While one is alive on a thread, the ready callbacks of the objects that thread completes
  // run when the last one ends instead of at once. A submitter declares one before it takes
  // its own lock to fail calls: a dependent call's callback takes that same lock, so it must
  // run after the lock is released (docs/architecture.md "Locks and their order").
  class DeferCallbacks {
   public:
    DeferCallbacks();
    ~DeferCallbacks();
    DeferCallbacks(const DeferCallbacks&) = delete;
    DeferCallbacks& operator=(const DeferCallbacks&) = delete;
  };

  // Marks `id` as expected (a call's return value, a fetch in flight). Returns false when the
  // object already had a state other than "referenced only".
  bool MarkPending(const ObjectId& id) EXCLUDES(mu_);
  void PutValue(const ObjectId& id, std::shared_ptr<const std::string> bytes) EXCLUDES(mu_);
  void PutError(const ObjectId& id, ObjectError error) EXCLUDES(mu_);
  // The value is in a node's store at `location`. `owned`: this process owns it, so the
  // store's copies are freed (the free hook) when the entry goes: its last ref dropped, or no
  // ref was left when it arrived.
  void PutLocation(const ObjectId& id, proto::ObjectLocationMsg location, bool owned) EXCLUDES(mu_);
  using FreeHook = std::function<void(const ObjectId&, const proto::ObjectLocationMsg&)>;
  // Set before any object arrives; runs without the store's lock.
  void SetFreeHook(FreeHook hook) { free_hook_ = std::move(hook); }
  // Called (outside the lock) whenever an object completes, held or not: the runtime's task
  // table learns how its tasks ended (task_table.h). Set before the store is used.
  using CompletionHook = std::function<void(const ObjectId&, const ObjectValue&)>;
  void SetCompletionHook(CompletionHook hook) { completion_hook_ = std::move(hook); }
  // The owned store-kept values still referenced (freed by the runtime when it stops).
  std::vector<std::pair<ObjectId, proto::ObjectLocationMsg>> OwnedLocations() EXCLUDES(mu_);

  enum class Presence { kAbsent, kReferenced, kPending, kReady };
  Presence Lookup(const ObjectId& id) EXCLUDES(mu_);

  // Waits for the value. Timeout (timeout_ms >= 0 elapsed) or NotFound (nobody will produce
  // it) as Status.
  Result<ObjectValue> Get(const ObjectId& id, int timeout_ms) EXCLUDES(mu_);
  // Which of `ids` are ready once `num_returns` are, or at the timeout.
  std::vector<bool> Wait(const std::vector<ObjectId>& ids, int num_returns, int timeout_ms)
      EXCLUDES(mu_);
  // Runs `cb` once the object is ready: at once (on this thread) if it is, else on the
  // thread that completes it.
  // The callback runs without the store's lock, so it may call back into the store.
  void OnReady(const ObjectId& id, Callback cb) EXCLUDES(mu_);

  // Local reference counting by ObjectRef holders. `owner`: set when another process owns
  // the object, which is told (the borrow hook, +1) when this process starts holding refs to
  // it and (-1) when its entry goes. An entry goes when no ref, borrower, pin or callback is
  // left; one that was shared (MarkShared, or borrowed) only kShareGraceS seconds after that
  // (ReleaseExpired), so that a borrower's +1 that is still on its way finds it.
  void AddRef(const ObjectId& id, const std::string& owner = std::string()) EXCLUDES(mu_);
  void RemoveRef(const ObjectId& id) EXCLUDES(mu_);
  // Kept for as long as this process lives.
  void Pin(const ObjectId& id) EXCLUDES(mu_);
  // A ref to this owned object was packed inside a value.
  void MarkShared(const ObjectId& id) EXCLUDES(mu_);
  // The refs the value of `id` contains are kept for as long as this process lives (an
  // actor's constructor arguments, which the head keeps for restarts).
  void PinContained(const ObjectId& id) EXCLUDES(mu_);
  // The value of `id` contains these refs: they live as long as its entry does.
  void AttachContained(const ObjectId& id,
                       std::vector<std::shared_ptr<const internal::RefHolder>> refs) EXCLUDES(mu_);
  // Owner side of a borrow: `borrower` started (+1) or stopped (-1) holding refs. NotFound
  // when the object is gone (or is not this process's), Unavailable past
  // kMaxBorrowers processes.
  Status AddBorrower(const ObjectId& id, const std::string& borrower, int delta) EXCLUDES(mu_);
  // The processes that borrow objects owned here; DropBorrower forgets one (it died).
  std::set<std::string> Borrowers() EXCLUDES(mu_);
  void DropBorrower(const std::string& borrower) EXCLUDES(mu_);
  // Erases the shared entries whose grace period has passed.
  void ReleaseExpired(double now) EXCLUDES(mu_);
  // The borrowed objects (id, owner), which this process stops telling their owners about:
  // it is stopping and tells them itself.
  std::vector<std::pair<ObjectId, std::string>> TakeBorrowed() EXCLUDES(mu_);
  using BorrowHook = std::function<void(const ObjectId&, const std::string& owner, int delta)>;
  // Set before the first ref; runs without the store's lock.
  void SetBorrowHook(BorrowHook hook) { borrow_hook_ = std::move(hook); }
  static constexpr double kShareGraceS = 3.0;
  static constexpr size_t kMaxBorrowers = 4096;
  size_t Size() EXCLUDES(mu_);

  // Hooks called around a blocking wait (either may be null): a worker moves its call loop
  // to a new thread before a call blocks.
  static void SetBlockHooks(void (*before)(), void (*after)());
  // Runs the block hooks around a blocking wait. Must be made without a lock held: the hooks
  // may wait for other threads, which may need it.
  struct BlockScope {
    BlockScope();
    ~BlockScope();
    BlockScope(const BlockScope&) = delete;
    BlockScope& operator=(const BlockScope&) = delete;
  };

 private:
  // What only entries whose refs crossed processes carry (kept apart: the table's entries
  // stay small, and its lookups fast).
  struct Sharing {
    std::string borrowed_from;  // the owner told of this process's borrow (empty: none)
    std::unordered_map<std::string, int64_t> borrowers;  // owner side: refs held elsewhere
    std::vector<std::shared_ptr<const internal::RefHolder>> contained;  // refs inside the value
  };
  struct Entry {
    enum State { kReferenced, kPending, kReady } state = kReferenced;
    ObjectValue value;
    int refs = 0;
    bool pinned = false;
    bool owned_location = false;       // value.location is this process's to free
    bool shared = false;               // packed inside a value, or borrowed: goes after a grace
    double release_at = 0;             // when a shared entry that nothing holds goes (0: not due)
    std::unique_ptr<Sharing> sharing;  // made on first use: most entries never need it
    std::vector<Callback> callbacks;
  };
  // Sharing& of an entry, made on first use.
  static Sharing& SharingOf(Entry& e) {
    if (!e.sharing) e.sharing = std::make_unique<Sharing>();
    return *e.sharing;
  }
  static bool Borrowed(const Entry& e) { return e.sharing && !e.sharing->borrowed_from.empty(); }
  static bool HasBorrowers(const Entry& e) { return e.sharing && !e.sharing->borrowers.empty(); }
  using Entries = std::unordered_map<ObjectId, Entry, IdHash>;
  // What an erased entry leaves to do once the lock is released (Finish): free its owned
  // location, end its borrow, drop the refs it contained.
  struct Released {
    ObjectId id;
    std::shared_ptr<const proto::ObjectLocationMsg> location;
    std::string borrowed_from;
    std::vector<std::shared_ptr<const internal::RefHolder>> contained;
  };
  void Complete(const ObjectId& id, ObjectValue value, bool owned = false) EXCLUDES(mu_);
  Released EraseLocked(Entries::iterator it) REQUIRES(mu_);
  // Erases the entry when nothing holds it any more and, for a shared one, its grace has
  // passed (else starts the grace). `now`: MonotonicSeconds() when 0.
  std::optional<Released> MaybeReleaseLocked(Entries::iterator it, double now = 0) REQUIRES(mu_);
  void Finish(const std::optional<Released>& r);
  // Whether a Get of `id` need not wait: it is ready, or nobody holds it (NotFound).
  bool DoneLocked(const ObjectId& id) REQUIRES(mu_);
  // Wait's sleep (after its watch): until num_returns of ids are ready or the deadline (a
  // timeout_ms of -1: none) passes; `out` says which are ready then.
  void WaitForReady(const std::vector<ObjectId>& ids, int num_returns, int timeout_ms,
                    std::chrono::steady_clock::time_point deadline, std::vector<bool>* out)
      EXCLUDES(mu_);
  // What a Get of `id` returns once DoneLocked.
  Result<ObjectValue> ValueLocked(const ObjectId& id) REQUIRES(mu_);
  // Sets (*ready)[i] to whether ids[i] is ready; true when num_returns of them are.
  bool CountReadyLocked(const std::vector<ObjectId>& ids, int num_returns, std::vector<bool>* ready)
      REQUIRES(mu_);

  Mutex mu_;
  CondVar cv_;
  std::atomic<uint64_t> completions_{0};  // bumped by every Complete (wait_spin.h)
  Entries entries_ GUARDED_BY(mu_);
  std::unordered_set<ObjectId, IdHash> in_grace_
      GUARDED_BY(mu_);  // may name erased or revived entries
  FreeHook free_hook_;
  CompletionHook completion_hook_;
  BorrowHook borrow_hook_;
};

}  // namespace orrery::runtime
