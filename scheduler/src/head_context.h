// What the head's managers share: the state store, the outbox their messages leave by, and
// small helpers. The head's structure (HeadService and its managers): docs/architecture.md
// "The head". Every manager runs on the head's inbox thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "core/internal/clock.h"
#include "core/internal/outbox.h"
#include "core/internal/protocol.h"
#include "core/internal/state_store.h"
#include "core/internal/thread_annotations.h"
#include "orrery/ids.h"
#include "orrery/status.h"

namespace orrery::scheduler {

// Drivers heartbeat this often (actors/src/job_registration.h); a driver is dead after at
// least kMinDriverToleranceS of silence, or sooner when a probe finds it gone.
inline constexpr double kDriverHeartbeatS = 1.0;
inline constexpr double kMinDriverToleranceS = 5.0;
// ActorOptionsMsg::lifetime of a detached actor.
inline constexpr int kDetachedLifetime = 1;

inline double Now() { return MonotonicSeconds(); }
inline std::string Hex(const std::string& binary_id) {
  return UniqueId::FromBinary(binary_id).Hex();
}

// The records of one table of the state store, by key (what a manager restores itself from).
using TableRecords = std::map<std::string, std::string>;

// The managers send through orrery::Outbox (core/internal/outbox.h): the transport in the
// head, a recorder in unit tests. It may be called from any thread (an acknowledgement sent
// from the store's writer).
using ::orrery::Outbox;

// The acknowledgements that wait for the store (HeadContext::AckWhenStored), by recipient
// and request id: a request sent again while its acknowledgement waits adds no second wait.
// Thread-safe (the store's writer sends the acknowledgements).
class StoredAcks {
 public:
  // True when no acknowledgement of this request waits yet; it waits from now on.
  bool Add(const std::string& to, uint64_t request_id) EXCLUDES(mu_);
  void Remove(const std::string& to, uint64_t request_id) EXCLUDES(mu_);
  size_t size() const EXCLUDES(mu_);
  // Where the acknowledgements are sent from: `post` runs its function on the head's inbox
  // thread, whose sockets are bounded and closed once idle (the store's writer would keep a
  // socket to every driver it ever answered); none: the thread that learns they are stored.
  using Poster = std::function<void(std::function<void()>)>;
  void SetPoster(Poster post) EXCLUDES(mu_);
  // Runs `send` as SetPoster says.
  void Deliver(std::function<void()> send) EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::set<std::pair<std::string, uint64_t>> waiting_ GUARDED_BY(mu_);
  Poster post_ GUARDED_BY(mu_);
};

struct HeadContext {
  std::shared_ptr<StateStore> store;
  std::shared_ptr<Outbox> outbox;
  // Shared by the copies every manager keeps.
  std::shared_ptr<StoredAcks> stored_acks = std::make_shared<StoredAcks>();

  // Announces a state change on the events channel: {"table", "id", "state"}.
  void Publish(const std::string& table, const std::string& id, const std::string& state) const;
  // Answers a request with an AckMsg (nothing when `to` is empty).
  void Ack(const std::string& to, uint64_t request_id, bool ok = true,
           proto::ErrorKind kind = proto::ErrorKind::kNone, const std::string& message = "") const;
  // Answers a request with an ok AckMsg once the store holds every write made so far: the
  // sender, which sends the request again until answered, may then forget it, since a head
  // restart can no longer lose what it changed. Through a Redis outage the answer waits.
  void AckWhenStored(const std::string& to, uint64_t request_id) const;
};

// Recovery helpers: whether a record read back from the store can be used, logging why not.
bool RecordUsable(const Status& parsed, const char* table, const std::string& key);
// A record is filed under its own id (docs/redis-schema.md). One under another key was not
// written by a head: restored, it would shadow or duplicate the record of that id.
bool FiledUnderItsId(const std::string& id_hex, const char* table, const std::string& key);

}  // namespace orrery::scheduler
