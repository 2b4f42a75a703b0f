#include "actors/src/actor_submitter.h"

#include <unistd.h>

#include <algorithm>

#include "core/internal/clock.h"
#include "orrery/errors.h"

namespace orrery::runtime {

using proto::MsgType;

std::shared_ptr<ActorSubmitter::ActorState> ActorSubmitter::FindActor(const ActorId& id) {
  MutexLock lock(&actors_mu_);
  auto it = actors_.find(id);
  return it == actors_.end() ? nullptr : it->second;
}

std::shared_ptr<ActorSubmitter::ActorState> ActorSubmitter::ActorFor(const ActorId& id,
                                                                     bool subscribe) {
  std::shared_ptr<ActorState> a;
  {
    MutexLock lock(&actors_mu_);
    auto& slot = actors_[id];
    if (!slot) slot = std::make_shared<ActorState>();
    a = slot;
  }
  if (subscribe) {
    bool send = false;
    {
      MutexLock lock(&a->mu);
      if (!a->subscribed) send = a->subscribed = true;
      if (send) a->subscribed_at = MonotonicSeconds();
    }
    if (send) head_.SubscribeActor(id);
  }
  return a;
}

void ActorSubmitter::AddOwned(const ActorId& id, bool detached, int max_task_retries,
                              int max_pending_calls) {
  auto a = ActorFor(id, false);
  MutexLock lock(&a->mu);
  a->subscribed = true;  // the owner is subscribed by the head
  a->owned = true;
  a->detached = detached;
  a->max_task_retries = max_task_retries;
  a->max_pending_calls = max_pending_calls;
}

uint64_t ActorSubmitter::DefaultPendingBytes() {
  static const uint64_t budget = [] {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t memory = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 8ull << 30;
    return std::min<uint64_t>(128ull << 20, memory / 8);
  }();
  return budget;
}

uint64_t ActorSubmitter::ArgBytes(const std::vector<internal::ArgSlot>& args) {
  uint64_t bytes = 0;
  for (const auto& slot : args) bytes += slot.bytes.size();
  return bytes;
}

void ActorSubmitter::CheckPending(const ActorId& actor, uint64_t arg_bytes) {
  auto a = FindActor(actor);
  if (!a) return;  // nothing pending yet
  MutexLock lock(&a->mu);
  size_t pending = a->queue.size() + a->inflight.size();
  if (a->max_pending_calls < 0 || pending == 0) return;
  if (a->max_pending_calls > 0) {
    if (pending < size_t(a->max_pending_calls)) return;
    throw PendingCallsLimitExceededError(
        "actor " + actor.Hex() + " has " + std::to_string(pending) +
        " calls pending from this process, its limit (SetMaxPendingCalls(" +
        std::to_string(a->max_pending_calls) + ")); wait for some to finish");
  }
  if (a->pending_bytes + arg_bytes + kCallOverheadBytes <= default_pending_bytes_) return;
  throw PendingCallsLimitExceededError(
      "actor " + actor.Hex() + " has " + std::to_string(pending) + " calls pending from this " +
      "process, holding " + std::to_string(a->pending_bytes >> 20) + " MiB: the default " +
      "budget of " + std::to_string(default_pending_bytes_ >> 20) + " MiB is reached; wait for " +
      "some to finish, or set ActorCreator::SetMaxPendingCalls");
}

void ActorSubmitter::Done(ActorState& a, const PendingCall& call) {
  a.pending_bytes -= std::min(a.pending_bytes, call.pending_bytes);
}

void ActorSubmitter::Fail(ActorState& a, const PendingCall& call, const ObjectError& error) {
  Done(a, call);
  FailCall(store_, call, error);
}

void ActorSubmitter::Forget(const ActorId& id) {
  MutexLock lock(&actors_mu_);
  actors_.erase(id);
}

void ActorSubmitter::Submit(const ActorId& actor, std::shared_ptr<PendingCall> call) {
  self_.submitted.fetch_add(1, std::memory_order_relaxed);
  ObjectStore::DeferCallbacks defer;  // failed calls complete after the lock is released
  auto a = ActorFor(actor, true);
  {
    MutexLock lock(&a->mu);
    if (a->state == proto::ActorState::kDead) {
      FailCall(store_, *call, a->death);
      return;
    }
    call->retries_left = a->max_task_retries;
    call->unresolved = 1;
    call->pending_bytes = kCallOverheadBytes + ArgBytes(call->slots);
    a->pending_bytes += call->pending_bytes;
    a->queue.push_back(call);
  }
  resolver_.Resolve(call, [this, actor, a, call] {
    ObjectStore::DeferCallbacks defer;
    MutexLock lock(&a->mu);
    call->unresolved = 0;
    Dispatch(actor, *a);
  });
}

proto::CallMsg ActorSubmitter::CallFor(const ActorId& id, const ActorState& a,
                                       const PendingCall& call) const {
  proto::CallMsg m;
  m.object_id = call.return_id.Binary();
  m.reply_to = self_.address;
  m.actor_id = id.Binary();
  m.seq = a.next_seq;
  m.function = call.function;
  m.first_pending = a.inflight.empty() ? a.next_seq : a.inflight.begin()->first;
  return m;
}

void ActorSubmitter::Dispatch(const ActorId& id, ActorState& a) {
  while (!a.queue.empty()) {
    auto call = a.queue.front();
    if (call->unresolved > 0) break;
    if (call->dep_error) {
      a.queue.pop_front();
      Fail(a, *call, *call->dep_error);
      continue;
    }
    if (a.state == proto::ActorState::kDead) {
      a.queue.pop_front();
      Fail(a, *call, a.death);
      continue;
    }
    if (a.state != proto::ActorState::kAlive) break;
    // The number is spent only once the transport has taken the call: a refused call keeps
    // its place (and the number) for the next try, so the worker never waits for a number
    // that was never sent.
    Status sent =
        outbox_.TrySendUnordered(a.address, MsgType::kCall, CallFor(id, a, *call), &call->args);
    if (sent.code() == StatusCode::kUnavailable) {
      a.blocked = true;  // the queue to the actor is full: Tick or a reply resumes
      break;
    }
    a.queue.pop_front();
    if (!sent.ok()) {  // it can never go (a malformed address)
      Fail(a, *call,
           ObjectError{proto::ErrorKind::kConnectionError, "",
                       "the call to " + call->function + " was not sent: " + sent.message(),
                       call->function, ""});
      continue;
    }
    a.blocked = false;
    call->seq = a.next_seq++;
    a.inflight[call->seq] = call;
  }
}

void ActorSubmitter::Tick(double now) {
  ObjectStore::DeferCallbacks defer;
  std::vector<std::pair<ActorId, std::shared_ptr<ActorState>>> actors;
  {
    MutexLock lock(&actors_mu_);
    for (const auto& [id, a] : actors_) actors.emplace_back(id, a);
  }
  for (const auto& [id, a] : actors) {
    MutexLock lock(&a->mu);
    if (a->subscribed && !a->owned && !a->heard && now - a->subscribed_at >= kResubscribeS) {
      a->subscribed_at = now;  // the subscription was lost (with a head that stopped, say)
      head_.SubscribeActor(id);
    }
    if (a->blocked) Dispatch(id, *a);
    if (a->state != proto::ActorState::kAlive || a->inflight.empty()) continue;
    if (now - a->announced < kAnnounceS) continue;
    a->announced = now;
    // The oldest call made no progress since the last announcement: the head is asked how
    // the actor stands. A worker whose death the head never reports (a restarted head that
    // never heard of the actor kills it as a stray) would leave the calls waiting for good;
    // an actor the head does not know is answered dead.
    uint64_t oldest = a->inflight.begin()->first;
    if (a->announced_oldest == oldest) head_.SubscribeActor(id);
    a->announced_oldest = oldest;
    outbox_.Send(
        a->address, MsgType::kCallsSent,
        proto::CallsSentMsg{id.Binary(), self_.address, a->next_seq, a->inflight.begin()->first});
  }
}

void ActorSubmitter::OnReply(const ActorId& actor, uint64_t seq) {
  ObjectStore::DeferCallbacks defer;
  // A reply naming an actor this process never called changes nothing (and adds no entry).
  if (auto a = FindActor(actor)) {
    MutexLock lock(&a->mu);
    auto it = a->inflight.find(seq);
    if (it == a->inflight.end()) return;
    Done(*a, *it->second);
    a->inflight.erase(it);
    if (a->blocked) Dispatch(actor, *a);  // the worker read a call: room, likely
  }
}

void ActorSubmitter::OnCallsLost(const proto::CallsLostMsg& lost) {
  ObjectStore::DeferCallbacks defer;
  ActorId id(UniqueId::FromBinary(lost.actor_id));
  auto a = FindActor(id);
  if (!a || lost.end_seq <= lost.first_seq) return;
  MutexLock lock(&a->mu);
  if (a->state != proto::ActorState::kAlive || lost.call_address != a->address) return;
  auto first = a->inflight.lower_bound(lost.first_seq);
  auto end = a->inflight.lower_bound(lost.end_seq);
  for (auto it = first; it != end; ++it) {
    const auto& call = *it->second;
    Fail(*a, call,
         ObjectError{proto::ErrorKind::kConnectionError, "",
                     "the call to " + call.function + " of actor " + id.Hex() +
                         " did not run: " + lost.message,
                     call.function, ""});
  }
  a->inflight.erase(first, end);
}

void ActorSubmitter::RequeueInflight(ActorState& a, const proto::ActorUpdateMsg& u) {
  // A node's memory monitor kills with OutOfMemoryError, whose cause says why.
  bool oom = u.death_kind == proto::ErrorKind::kOutOfMemoryError;
  for (auto it = a.inflight.rbegin(); it != a.inflight.rend(); ++it) {
    auto& call = it->second;
    if (call->cancelled) {  // its result is TaskCancelledError already
      Done(a, *call);
      continue;
    }
    if (call->retries_left != 0) {
      if (call->retries_left > 0) --call->retries_left;
      a.queue.push_front(call);
    } else {
      Fail(a, *call,
           ObjectError{oom ? u.death_kind : proto::ErrorKind::kActorDiedError, "",
                       (oom ? "actor method " + call->function + " failed: "
                            : "the actor died while running " + call->function + ": ") +
                           u.death_cause,
                       call->function, ""});
    }
  }
  a.inflight.clear();
}

void ActorSubmitter::MarkDead(const ActorId& id, ActorState& a, ObjectError death) {
  a.state = proto::ActorState::kDead;
  a.death = std::move(death);
  for (auto& [seq, call] : a.inflight) Fail(a, *call, a.death);
  a.inflight.clear();
  Dispatch(id, a);  // fails the queue
}

void ActorSubmitter::OnUpdate(const proto::ActorUpdateMsg& u) {
  ObjectStore::DeferCallbacks defer;  // failed calls complete after the lock is released
  ActorId id(UniqueId::FromBinary(u.actor_id));
  auto a = FindActor(id);
  if (!a) return;  // not an actor this process created or called: nothing to update
  MutexLock lock(&a->mu);
  a->heard = true;
  if (a->state == proto::ActorState::kDead) return;
  if (u.incarnation < a->incarnation) return;
  auto state = proto::ActorState(u.state);
  if (state == proto::ActorState::kAlive) {
    if (u.incarnation <= a->killed_incarnation) return;  // the instance we killed
    if (u.incarnation != a->incarnation) {
      if (a->incarnation >= 0) RequeueInflight(*a, u);
      a->incarnation = u.incarnation;
      a->next_seq = 0;
    }
    a->state = state;
    a->address = u.address;
    a->control_address = u.control_address;
    Dispatch(id, *a);
  } else if (state == proto::ActorState::kRestarting) {
    outbox_.MarkPeerGone(a->address);
    RequeueInflight(*a, u);
    a->state = state;
    a->address.clear();
  } else if (state == proto::ActorState::kDead) {
    outbox_.MarkPeerGone(a->address);
    proto::ErrorKind kind =
        u.death_kind == proto::ErrorKind::kNone ? proto::ErrorKind::kActorDiedError : u.death_kind;
    MarkDead(id, *a,
             ObjectError{kind, "",
                         kind == proto::ErrorKind::kActorDiedError
                             ? "actor " + id.Hex() + " died: " + u.death_cause
                             : u.death_cause,
                         "", ""});
  }
}

bool ActorSubmitter::Cancel(const ObjectId& id, bool force, std::string* function) {
  std::vector<std::shared_ptr<ActorState>> actors;
  {
    MutexLock lock(&actors_mu_);
    for (const auto& [actor, a] : actors_) actors.push_back(a);
  }
  auto refuse_force = [&](const PendingCall& call) {
    if (force) {
      throw ConfigError(
          "Cancel: force is not supported for actor calls (it would kill the "
          "actor running " +
          call.function + "); cancel without force");
    }
  };
  for (const auto& a : actors) {
    MutexLock lock(&a->mu);
    for (auto it = a->queue.begin(); it != a->queue.end(); ++it) {
      if ((*it)->return_id != id) continue;
      refuse_force(**it);
      (*it)->cancelled = true;
      *function = (*it)->function;
      Done(*a, **it);
      a->queue.erase(it);
      return true;
    }
    for (const auto& [seq, call] : a->inflight) {
      if (call->return_id != id) continue;
      refuse_force(*call);
      call->cancelled = true;
      *function = call->function;
      // The control address reaches the worker even while a call of it runs; an actor whose
      // update came from a restarted head has none yet: the call address then.
      outbox_.Send(a->control_address.empty() ? a->address : a->control_address, MsgType::kCancel,
                   proto::CancelMsg{id.Binary(), false});
      return true;
    }
  }
  return false;
}

bool ActorSubmitter::Unanswered(const ActorId& actor, const ObjectId& id, std::string* function) {
  std::shared_ptr<ActorState> a = FindActor(actor);
  if (!a) return false;
  MutexLock lock(&a->mu);
  auto is_it = [&](const std::shared_ptr<PendingCall>& call) {
    // A cancelled call's result (TaskCancelledError) is there already.
    if (call->return_id != id || call->cancelled) return false;
    *function = call->function;
    return true;
  };
  if (std::any_of(a->queue.begin(), a->queue.end(), is_it)) return true;
  return std::any_of(a->inflight.begin(), a->inflight.end(),
                     [&](const auto& entry) { return is_it(entry.second); });
}

void ActorSubmitter::Kill(const ActorId& actor, bool no_restart) {
  ObjectStore::DeferCallbacks defer;  // failed calls complete after the lock is released
  head_.KillActor(actor, no_restart);
  auto a = ActorFor(actor, false);
  MutexLock lock(&a->mu);
  if (a->state == proto::ActorState::kDead) return;
  if (!no_restart) {
    // Later calls wait for the next incarnation (or fail if there is none).
    if (a->state == proto::ActorState::kAlive) {
      a->killed_incarnation = a->incarnation;
      a->state = proto::ActorState::kRestarting;
      a->address.clear();
    }
    return;
  }
  MarkDead(actor, *a,
           ObjectError{proto::ErrorKind::kActorDiedError, "",
                       "actor " + actor.Hex() + " was killed by orrery::Kill", "", ""});
}

void ActorSubmitter::KillOwned() {
  ObjectStore::DeferCallbacks defer;  // failed calls complete after the lock is released
  std::vector<ActorId> owned;
  {
    MutexLock lock(&actors_mu_);
    for (auto& [id, a] : actors_) {
      MutexLock l(&a->mu);
      if (a->owned && !a->detached && a->state != proto::ActorState::kDead) owned.push_back(id);
    }
  }
  for (const auto& id : owned) Kill(id, true);
}

}  // namespace orrery::runtime
