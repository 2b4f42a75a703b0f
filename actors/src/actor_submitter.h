// Actor calls (docs/architecture.md "Client runtime"): one queue per actor, sent straight to
// the actor's worker in submission order with a per-incarnation sequence number; calls in
// flight when an incarnation dies are resent to the next one (while they have retries left)
// or failed; the head's actor updates drive each actor's state.
//
// The call path has no gaps (docs/protocol.md "Call order without gaps"): a sequence number is
// spent only on a call the transport took. A call the transport refuses (the send queue to the
// actor is full) stays first in line and is sent again on the next reply from the actor or the next
// tick; the calls pending to one actor are bounded (SetMaxPendingCalls, or a memory budget),
// and a submission past the bound throws PendingCallsLimitExceededError at once. Calls the
// worker reports lost (kCallsLost: handed over, then dropped by the transport) fail with
// ConnectionError.
//
// Thread-safety: every method may be called from any thread; OnReply and OnUpdate run on
// the inbox thread. Lock order: actors_mu_, then an ActorState's mu. Sends happen under an
// ActorState's mu (that is what keeps an actor's calls in order).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "actors/src/arg_resolver.h"
#include "actors/src/head_client.h"
#include "actors/src/object_store.h"
#include "actors/src/submission.h"
#include "core/internal/protocol.h"
#include "core/internal/thread_annotations.h"

namespace orrery::runtime {

class ActorSubmitter {
 public:
  // All five outlive the submitter.
  ActorSubmitter(const ProcessIdentity& self, Outbox& outbox, HeadClient& head, ObjectStore& store,
                 ArgResolver& resolver)
      : self_(self), outbox_(outbox), head_(head), store_(store), resolver_(resolver) {}

  // An actor this process creates: its owner is subscribed to its updates by the head.
  // max_pending_calls: as CallOptions::max_pending_calls.
  void AddOwned(const ActorId& id, bool detached, int max_task_retries, int max_pending_calls = 0)
      EXCLUDES(actors_mu_);
  // Drops an actor whose creation the head refused.
  void Forget(const ActorId& id) EXCLUDES(actors_mu_);
  // Queues a call (its return_id set, its arguments in slots); it is sent once its
  // arguments are resolved, the actor is alive and every earlier call has been sent.
  // Throws PendingCallsLimitExceededError, submitting nothing, when the actor's pending calls
  // are at their bound (checked before the call's result exists: call it first).
  // arg_bytes: ArgBytes of the call's arguments.
  void CheckPending(const ActorId& actor, uint64_t arg_bytes) EXCLUDES(actors_mu_);
  void Submit(const ActorId& actor, std::shared_ptr<PendingCall> call) EXCLUDES(actors_mu_);
  // The runtime's tick: sends again the calls of actors whose send queue was full, tells
  // the workers of actors with unanswered calls how far it has sent (kCallsSent), at most
  // every kAnnounceS (asking the head again how the actor stands when the oldest of them is
  // still the one of the last time), and subscribes again to an actor of another's it has not heard
  // of for kResubscribeS (the head answers a subscription at once, but one sent as it stopped is
  // lost with its connection).
  void Tick(double now) EXCLUDES(actors_mu_);
  static constexpr double kAnnounceS = 5;
  static constexpr double kResubscribeS = 1;
  // Asks the head to kill the actor. no_restart: later calls fail; else they wait for the
  // next incarnation.
  void Kill(const ActorId& actor, bool no_restart) EXCLUDES(actors_mu_);
  // Kills the non-detached actors this process created.
  void KillOwned() EXCLUDES(actors_mu_);

  // Inbox thread: the actor answered call `seq` (the result itself goes to the store).
  void OnReply(const ActorId& actor, uint64_t seq) EXCLUDES(actors_mu_);
  void OnUpdate(const proto::ActorUpdateMsg& update) EXCLUDES(actors_mu_);
  // Inbox thread: the actor's worker never got calls [first_seq, end_seq): they fail with
  // ConnectionError. Ignored unless it comes from the actor's current call address.
  void OnCallsLost(const proto::CallsLostMsg& lost) EXCLUDES(actors_mu_);

  // What each pending call counts against the default budget besides its arguments.
  static constexpr uint64_t kCallOverheadBytes = 512;
  // The default budget of one actor's pending calls: 128 MiB (twice what the transport
  // queues to one peer: the calls behind a flood wait for at most that much of it, some
  // 2,000 calls of 64 KiB or 250,000 small ones), or an eighth of this host's memory when
  // that is less.
  static uint64_t DefaultPendingBytes();
  // The bytes of a call's arguments, which count against that budget.
  static uint64_t ArgBytes(const std::vector<internal::ArgSlot>& args);
  // Replaces that budget (unit tests).
  void set_default_pending_bytes(uint64_t bytes) { default_pending_bytes_ = bytes; }
  // orrery::Cancel of the call whose result is `id`: removed when not sent yet, else its
  // worker is told (kCancel) and answers it TaskCancelledError unless it has started. False
  // when no actor call of this process has that result; *function: the call's method.
  // Throws ConfigError for force (it would kill the actor).
  bool Cancel(const ObjectId& id, bool force, std::string* function) EXCLUDES(actors_mu_);
  // Whether `id` is the result of a call of this process to `actor` not yet answered nor
  // cancelled; *function: the call's method.
  bool Unanswered(const ActorId& actor, const ObjectId& id, std::string* function)
      EXCLUDES(actors_mu_);

 private:
  struct ActorState {
    Mutex mu;
    proto::ActorState state GUARDED_BY(mu) = proto::ActorState::kPending;
    std::string address GUARDED_BY(mu);
    std::string control_address GUARDED_BY(mu);  // the worker's runtime inbox (kCancel)
    int incarnation GUARDED_BY(mu) = -1;
    // Kill(no_restart=false): ignore this one's updates.
    int killed_incarnation GUARDED_BY(mu) = -1;
    uint64_t next_seq GUARDED_BY(mu) = 0;
    int max_pending_calls GUARDED_BY(mu) = 0;
    uint64_t pending_bytes GUARDED_BY(mu) = 0;  // of the calls in queue and inflight
    bool blocked GUARDED_BY(mu) = false;        // the transport refused the queue's first call
    double announced GUARDED_BY(mu) = 0;        // when kCallsSent last went
    // The oldest call in flight then (UINT64_MAX: none yet).
    uint64_t announced_oldest GUARDED_BY(mu) = UINT64_MAX;
    int max_task_retries GUARDED_BY(mu) = 0;
    bool subscribed GUARDED_BY(mu) = false;
    bool heard GUARDED_BY(mu) = false;  // an update of the head's came
    double subscribed_at GUARDED_BY(mu) = 0;
    bool owned GUARDED_BY(mu) = false;
    bool detached GUARDED_BY(mu) = false;
    // Submission order, not yet sent.
    std::deque<std::shared_ptr<PendingCall>> queue GUARDED_BY(mu);
    std::map<uint64_t, std::shared_ptr<PendingCall>> inflight GUARDED_BY(mu);  // sent, by seq
    ObjectError death GUARDED_BY(mu);
  };

  std::shared_ptr<ActorState> ActorFor(const ActorId& id, bool subscribe) EXCLUDES(actors_mu_);
  // Null for an actor this process has no state for (messages from peers never add one).
  std::shared_ptr<ActorState> FindActor(const ActorId& id) EXCLUDES(actors_mu_);
  // Sends the queue's calls that can go now, in order; fails them once the actor is dead.
  void Dispatch(const ActorId& id, ActorState& a) REQUIRES(a.mu);
  // Calls sent to an incarnation that is gone: retried while they have retries left (in
  // their order, before the queue), failed otherwise.
  void RequeueInflight(ActorState& a, const proto::ActorUpdateMsg& u) REQUIRES(a.mu);
  void MarkDead(const ActorId& id, ActorState& a, ObjectError death) REQUIRES(a.mu);
  // A call leaves the actor's pending calls (answered, failed or cancelled).
  static void Done(ActorState& a, const PendingCall& call) REQUIRES(a.mu);
  // Fails a pending call that leaves with `error`.
  void Fail(ActorState& a, const PendingCall& call, const ObjectError& error) REQUIRES(a.mu);
  proto::CallMsg CallFor(const ActorId& id, const ActorState& a, const PendingCall& call) const
      REQUIRES(a.mu);

  const ProcessIdentity& self_;
  Outbox& outbox_;
  HeadClient& head_;
  ObjectStore& store_;
  ArgResolver& resolver_;
  uint64_t default_pending_bytes_ = DefaultPendingBytes();

  Mutex actors_mu_;
  std::unordered_map<ActorId, std::shared_ptr<ActorState>, IdHash> actors_ GUARDED_BY(actors_mu_);
};

}  // namespace orrery::runtime
