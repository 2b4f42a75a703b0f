// Cancellation (runtime.h, docs/api.md "Cancellation"): the caller's side of orrery::Cancel,
// and a worker's side of kCancel (which calls may not start, which running ones are told).
#include <cstdlib>

#include "actors/internal/runtime.h"
#include "core/internal/log.h"
#include "core/internal/transport.h"
#include "orrery/errors.h"

namespace orrery::runtime {

void Runtime::Cancel(const internal::RefHolder& ref, bool force) {
  const ObjectId& id = ref.id();
  if (!ref.owner().empty() && ref.owner() != address()) {
    throw Error("Cancel: object " + id.Hex() + " is the result of a call made by " + ref.owner() +
                "; only the process that made the call can cancel it");
  }
  if (store_.Lookup(id) == ObjectStore::Presence::kReady) return;  // done: its result stays
  std::string function;
  std::string what;
  if (actors_.Cancel(id, force, &function)) {
    what = "actor method " + function;
  } else if (tasks_.Cancel(id, force, &function)) {
    what = "task " + function;
  } else {
    // Its reply came meanwhile (the submitters let go of it just before the store has it).
    auto presence = store_.Lookup(id);
    if (presence == ObjectStore::Presence::kReady || presence == ObjectStore::Presence::kPending)
      return;
    throw Error("Cancel: object " + id.Hex() +
                " is not the result of a task or actor call this process has pending");
  }
  LOG_DEBUG("cancelled " + what + " " + id.Hex().substr(0, 8) + (force ? " (force)" : ""));
  store_.PutError(
      id, ObjectError{proto::ErrorKind::kTaskCancelledError, "",
                      what + " was cancelled" + (force ? " (force)" : ""), function, self_.where});
}

bool Runtime::BeginCall(const ObjectId& id) {
  MutexLock lock(&cancel_mu_);
  if (cancelled_.Contains(id)) return false;
  running_.insert(id);
  return true;
}

void Runtime::EndCall(const ObjectId& id) {
  {
    MutexLock lock(&cancel_mu_);
    running_.erase(id);
  }
  EndProducing(id);
  EndAsyncWaits(id);
}

void Runtime::NoteCallFreed(const ObjectId& id) {
  MutexLock lock(&cancel_mu_);
  freed_.Add(id);
}

bool Runtime::FreedHere(const ObjectId& id) {
  MutexLock lock(&cancel_mu_);
  return freed_.Contains(id);
}

bool Runtime::IsCallCancelled(const ObjectId& id) {
  MutexLock lock(&cancel_mu_);
  return cancelled_.Contains(id);
}

void Runtime::OnCancel(const proto::CancelMsg& m) {
  if (m.object_id.size() != UniqueId::kSize) {
    throw std::runtime_error("kCancel: an object id of " + std::to_string(m.object_id.size()) +
                             " bytes");
  }
  ObjectId id(UniqueId::FromBinary(m.object_id));
  bool running;
  {
    MutexLock lock(&cancel_mu_);
    running = running_.count(id) > 0;
    cancelled_.Add(id);
  }
  WakeProducers();                  // a stream waiting for its reader stops
  if (running) WakeAsyncWaits(id);  // a suspended async call resumes, to throw
  if (!m.force || !running) return;
  if (actor_worker_) {
    LOG_WARN("refusing a forced cancel of actor call " + id.Hex() + ": it would kill the actor");
    return;
  }
  // The task cannot be stopped from outside its thread: the worker goes, as with Ray's
  // force. Its node reports the exit, which frees the lease's resources; the caller queues
  // the worker's other tasks again.
  LOG_WARN("exiting: the caller of running task " + id.Hex() + " cancelled it with force");
  transport::RemoveLocalSockets();
  std::_Exit(1);
}

}  // namespace orrery::runtime
