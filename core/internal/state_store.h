// The cluster state store (docs/architecture.md "The head"): tables of id -> JSON value. The head
// writes every state change here and rebuilds itself from it on restart. The embedded default uses
// the in-memory store; a Redis-backed one implements the same interface.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/internal/metrics.h"
#include "core/internal/thread_annotations.h"
#include "orrery/status.h"

namespace orrery {

class StateStore {
 public:
  virtual ~StateStore() = default;
  virtual void Put(const std::string& table, const std::string& key, const std::string& json) = 0;
  virtual void Delete(const std::string& table, const std::string& key) = 0;
  // Every record of `table`. An error (the store cannot be read: Redis unreachable) is never
  // an empty table: a head must not start from nothing when its state is out of reach.
  virtual Result<std::map<std::string, std::string>> GetAll(const std::string& table) = 0;
  // Publishes a state-change event (JSON) on the events channel.
  virtual void Publish(const std::string& event_json) = 0;
  // Appends entry number `seq` (>= 0) to the stream `stream` (Redis: XADD
  // orrery:<cluster>:<stream> <seq>-1 ...). An entry whose seq is not above the stream's
  // last is a resend and is not appended: each entry is appended at most once, across
  // retries and head restarts alike.
  using StreamEntry = std::vector<std::pair<std::string, std::string>>;
  virtual void StreamAdd(const std::string& stream, int64_t seq, const StreamEntry& fields) = 0;
  // Deletes the stream `stream` (Redis: DEL orrery:<cluster>:<stream>), after every entry
  // appended to it before this call.
  virtual void StreamDelete(const std::string& stream) = 0;
  // Runs `done` once every Put, Delete and StreamAdd made before this call is stored for
  // good (Redis answered it), on whatever thread learns so (possibly this one, at once).
  // Lets the head acknowledge a driver's record only when a head restart cannot lose it.
  // `done` must be cheap and must not call back into the store.
  virtual void WhenWritten(std::function<void()> done) { done(); }
  // How long the store's writes took (a Redis store: each pipelined batch, from sending it to
  // its last reply), for the head's metrics (docs/metrics.md); thread-safe. Empty buckets
  // for a store that does not time its writes.
  virtual metrics::Histogram WriteLatency() const {
    return metrics::Histogram(WriteLatencyBounds());
  }
  // The histogram's upper bounds: 0.1 ms * 2^i, i < 16.
  static std::vector<double> WriteLatencyBounds() {
    return metrics::ExponentialBounds(1e-4, 2, 16);
  }
};

// Thread-safe in-memory store.
class InMemoryStateStore : public StateStore {
 public:
  void Put(const std::string& table, const std::string& key, const std::string& json) override;
  void Delete(const std::string& table, const std::string& key) override;
  Result<std::map<std::string, std::string>> GetAll(const std::string& table) override;
  void Publish(const std::string& event_json) override;
  void StreamAdd(const std::string& stream, int64_t seq, const StreamEntry& fields) override;
  void StreamDelete(const std::string& stream) override;
  std::vector<StreamEntry> Stream(const std::string& stream) const;

 private:
  mutable Mutex mu_;
  std::map<std::string, std::map<std::string, std::string>> tables_ GUARDED_BY(mu_);
  std::map<std::string, std::vector<StreamEntry>> streams_ GUARDED_BY(mu_);
  std::map<std::string, int64_t> stream_last_ GUARDED_BY(mu_);  // the last seq appended per stream
};

}  // namespace orrery
