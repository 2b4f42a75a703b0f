// Streaming calls (docs/api.md "Streaming results", docs/protocol.md "Streams"): the state a
// caller keeps for each streaming call it reads, and the state a worker keeps for each one it
// runs. The Runtime owns both tables (runtime_streams.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/internal/thread_annotations.h"
#include "orrery/api/object_ref.h"
#include "orrery/api/runtime_api.h"
#include "orrery/ids.h"

namespace orrery::runtime {

// The caller's side of one streaming call: the values received and not yet handed out, by
// index. Fed by kStreamItem on the inbox thread; read by ObjectRefGenerator::Next.
struct StreamState {
  explicit StreamState(ObjectId id) : call(std::move(id)) {}
  const ObjectId call;
  // Set (under the runtime's stream table lock) once a generator reads it: an unread stream
  // is forgotten when its call ends.
  bool opened = false;
  Mutex mu;
  CondVar cv;
  std::map<uint64_t, std::shared_ptr<internal::RefHolder>> items GUARDED_BY(mu);
  uint64_t next GUARDED_BY(mu) = 0;   // the index Next hands out next
  uint64_t acked GUARDED_BY(mu) = 0;  // what the producer was last told had been read
  std::string ack_to GUARDED_BY(mu);  // the producer's inbox (the newest attempt's)
  bool ended GUARDED_BY(mu) = false;  // the call's own result is there (a value or an error)
};

// The worker's side of one streaming call it runs.
struct StreamProducer {
  uint64_t sent = 0;
  uint64_t acked = 0;
  bool closed = false;  // the caller dropped the stream
};

// At most this many values of one stream wait to be read; a producer that runs further ahead
// than kStreamWindow (a peer that ignores the window) has the rest dropped, and the reader
// then fails with ObjectLostError where the first one is missing.
inline constexpr size_t kMaxBufferedItems = 4 * internal::kStreamWindow + 64;

}  // namespace orrery::runtime

namespace orrery::internal {

// What an ObjectRefGenerator holds: the call's ref and the caller's state of it. The last
// copy's end tells the producer to stop, when it has not ended.
class StreamReader {
 public:
  StreamReader(std::shared_ptr<RefHolder> end, std::shared_ptr<runtime::StreamState> state)
      : end_(std::move(end)), state_(std::move(state)) {}
  ~StreamReader();
  StreamReader(const StreamReader&) = delete;
  StreamReader& operator=(const StreamReader&) = delete;
  const std::shared_ptr<RefHolder>& end() const { return end_; }
  runtime::StreamState& state() { return *state_; }

 private:
  std::shared_ptr<RefHolder> end_;
  std::shared_ptr<runtime::StreamState> state_;
};

}  // namespace orrery::internal
