#include "actors/src/actor_submitter.h"

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
    }
    if (send) head_.SubscribeActor(id);
  }
  return a;
}

void ActorSubmitter::AddOwned(const ActorId& id, bool detached, int max_task_retries) {
  auto a = ActorFor(id, false);
  MutexLock lock(&a->mu);
  a->subscribed = true;  // the owner is subscribed by the head
  a->owned = true;
  a->detached = detached;
  a->max_task_retries = max_task_retries;
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
    a->queue.push_back(call);
  }
  resolver_.Resolve(call, [this, actor, a, call] {
    ObjectStore::DeferCallbacks defer;
    MutexLock lock(&a->mu);
    call->unresolved = 0;
    Dispatch(actor, *a);
  });
}

void ActorSubmitter::Dispatch(const ActorId& id, ActorState& a) {
  while (!a.queue.empty()) {
    auto call = a.queue.front();
    if (call->unresolved > 0) break;
    if (call->dep_error) {
      a.queue.pop_front();
      FailCall(store_, *call, *call->dep_error);
      continue;
    }
    if (a.state == proto::ActorState::kDead) {
      a.queue.pop_front();
      FailCall(store_, *call, a.death);
      continue;
    }
    if (a.state != proto::ActorState::kAlive) break;
    a.queue.pop_front();
    call->seq = a.next_seq++;
    proto::CallMsg m;
    m.object_id = call->return_id.Binary();
    m.reply_to = self_.address;
    m.actor_id = id.Binary();
    m.seq = call->seq;
    m.function = call->function;
    Status sent = outbox_.TrySend(a.address, MsgType::kCall, m, &call->args);
    if (!sent.ok()) {
      FailCall(store_, *call,
               ObjectError{proto::ErrorKind::kError, "",
                           "the call to " + call->function + " was not sent: " + sent.message(),
                           call->function, ""});
      continue;
    }
    a.inflight[call->seq] = call;
  }
}

void ActorSubmitter::OnReply(const ActorId& actor, uint64_t seq) {
  // A reply naming an actor this process never called changes nothing (and adds no entry).
  if (auto a = FindActor(actor)) {
    MutexLock lock(&a->mu);
    a->inflight.erase(seq);
  }
}

void ActorSubmitter::RequeueInflight(ActorState& a, const proto::ActorUpdateMsg& u) {
  // A node's memory monitor kills with OutOfMemoryError, whose cause says why.
  bool oom = u.death_kind == proto::ErrorKind::kOutOfMemoryError;
  for (auto it = a.inflight.rbegin(); it != a.inflight.rend(); ++it) {
    auto& call = it->second;
    if (call->cancelled) continue;  // its result is TaskCancelledError already
    if (call->retries_left != 0) {
      if (call->retries_left > 0) --call->retries_left;
      a.queue.push_front(call);
    } else {
      FailCall(store_, *call,
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
  for (auto& [seq, call] : a.inflight) FailCall(store_, *call, a.death);
  a.inflight.clear();
  Dispatch(id, a);  // fails the queue
}

void ActorSubmitter::OnUpdate(const proto::ActorUpdateMsg& u) {
  ObjectStore::DeferCallbacks defer;  // failed calls complete after the lock is released
  ActorId id(UniqueId::FromBinary(u.actor_id));
  auto a = FindActor(id);
  if (!a) return;  // not an actor this process created or called: nothing to update
  MutexLock lock(&a->mu);
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
