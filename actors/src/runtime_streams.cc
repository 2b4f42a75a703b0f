// Streaming calls (streams.h; docs/api.md "Streaming results", docs/protocol.md "Streams").
//
// The worker running a streaming call sends each value as kStreamItem to the caller, from the
// thread that runs the call, and then the call's reply (the number of values): one thread's
// messages to one peer arrive in order, so every value is there before the end. It stays at
// most kStreamWindow values ahead of what the caller has read, which the caller reports with
// kStreamAck. The caller owns the values, as it owns a call's result.
#include <chrono>

#include "actors/internal/runtime.h"
#include "actors/src/errors_util.h"
#include "actors/src/streams.h"
#include "core/internal/connect_probe.h"
#include "core/internal/log.h"
#include "core/internal/rate_limit.h"
#include "orrery/errors.h"

namespace orrery::runtime {

using proto::MsgType;

namespace {
RateLimitedLog g_stream_log(5.0);

void LogDropped(const std::string& why) {
  uint64_t suppressed = 0;
  if (g_stream_log.ShouldLog(&suppressed))
    LOG_WARN("dropping a stream value: " + why +
             (suppressed ? " (" + std::to_string(suppressed) + " more)" : ""));
}
}  // namespace

// ------------------------------------------------------------------ the caller's side

std::shared_ptr<StreamState> Runtime::StreamOf(const ObjectId& call, bool open) {
  std::shared_ptr<StreamState> state;
  {
    MutexLock lock(&streams_mu_);
    auto it = streams_.find(call);
    if (it != streams_.end()) {
      if (open) it->second->opened = true;
      return it->second;
    }
    // Only a call this process waits for has a stream (a peer cannot make up others), and
    // not one whose generator was dropped.
    if (!open &&
        (closed_streams_.Contains(call) || store_.Lookup(call) != ObjectStore::Presence::kPending))
      return nullptr;
    state = std::make_shared<StreamState>(call);
    state->opened = open;
    streams_.emplace(call, state);
  }
  // The end: a generator reading it learns of it.
  std::weak_ptr<StreamState> weak = state;
  store_.OnReady(call, [weak](const ObjectValue&) {
    auto s = weak.lock();
    if (!s) return;
    MutexLock lock(&s->mu);
    s->ended = true;
    s->cv.NotifyAll();
  });
  return state;
}

std::shared_ptr<internal::StreamReader> Runtime::OpenStream(
    std::shared_ptr<internal::RefHolder> call) {
  auto state = StreamOf(call->id(), /*open=*/true);
  return std::make_shared<internal::StreamReader>(std::move(call), std::move(state));
}

void Runtime::SweepStreams() {
  // A stream no generator opened (not a streaming call after all) goes with its call's ref.
  MutexLock lock(&streams_mu_);
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (!it->second->opened && store_.Lookup(it->first) == ObjectStore::Presence::kAbsent) {
      it = streams_.erase(it);
    } else {
      ++it;
    }
  }
}

void Runtime::CloseStream(StreamState& s) {
  {
    MutexLock lock(&streams_mu_);
    streams_.erase(s.call);
    // Its values still to come are answered with a closed ack (OnStreamItem), also when the
    // producer has sent none yet and so has no address here to be told at.
    closed_streams_.Add(s.call);
  }
  std::map<uint64_t, std::shared_ptr<internal::RefHolder>> unread;
  std::string ack_to;
  {
    MutexLock lock(&s.mu);
    unread.swap(s.items);
    if (!s.ended) ack_to = s.ack_to;
  }
  if (!ack_to.empty())
    outbox_.Send(ack_to, MsgType::kStreamAck, proto::StreamAckMsg{s.call.Binary(), 0, true});
}

Status Runtime::OnStreamItem(transport::Envelope& env) {
  proto::StreamItemMsg m;
  if (Status s = env.Decode(&m); !s.ok()) return s;
  if (m.call_id.size() != UniqueId::kSize || m.object_id.size() != UniqueId::kSize ||
      !PlausibleAddress(m.ack_to)) {
    return Status::InvalidArgument("malformed stream value (call id of " +
                                   std::to_string(m.call_id.size()) + " bytes, object id of " +
                                   std::to_string(m.object_id.size()) + " bytes)");
  }
  ObjectId item(UniqueId::FromBinary(m.object_id));
  if (store_.Lookup(item) != ObjectStore::Presence::kAbsent) {
    LogDropped("its object id " + item.Hex() + " is taken");
    return Status::Ok();
  }
  std::shared_ptr<StreamState> s = StreamOf(ObjectId(UniqueId::FromBinary(m.call_id)), false);
  bool keep = false;
  uint64_t consumed = 0;
  if (s) {
    MutexLock lock(&s->mu);
    s->ack_to = m.ack_to;
    consumed = s->next;
    // A retried call sends its values again: the first of each index stays.
    keep = m.index >= s->next && !s->items.count(m.index) && s->items.size() < kMaxBufferedItems;
    if (keep) {
      auto ref = internal::MakeRef(item, address());
      store_.MarkPending(item);
      KeepReplyRefs(item, m.contained);
      s->items.emplace(m.index, ref);
    }
  }
  if (m.location.empty()) {
    if (keep) store_.PutValue(item, std::make_shared<const std::string>(env.PayloadString()));
  } else {
    // Owned by this process: one nobody holds (not kept) is freed at once.
    store_.PutLocation(item, std::move(m.location), /*owned=*/true);
  }
  if (keep) {
    MutexLock lock(&s->mu);
    s->cv.NotifyAll();
  } else if (s) {
    // A repeat (a retried producer): tell it how far the reader is.
    outbox_.Send(m.ack_to, MsgType::kStreamAck, proto::StreamAckMsg{m.call_id, consumed, false});
  } else {
    // Nobody reads it (the generator was dropped before the producer's first value came, so
    // the producer has no address to hear of it): the producer stops.
    LogDropped("no stream of call " + UniqueId::FromBinary(m.call_id).Hex() + " is read here");
    outbox_.Send(m.ack_to, MsgType::kStreamAck, proto::StreamAckMsg{m.call_id, 0, true});
  }
  return Status::Ok();
}

void Runtime::AckStreamLocked(StreamState& s) {
  if (s.next == s.acked || s.ack_to.empty()) return;
  s.acked = s.next;
  outbox_.Send(s.ack_to, MsgType::kStreamAck, proto::StreamAckMsg{s.call.Binary(), s.next, false});
}

// The next value of `s`, or nullptr at its end (throwing the producer's error, after its
// values). False: none yet.
bool Runtime::TakeStreamItemLocked(StreamState& s, const internal::RefHolder& end_ref,
                                   std::shared_ptr<internal::RefHolder>* out) {
  while (true) {
    if (auto it = s.items.find(s.next); it != s.items.end()) {
      *out = std::move(it->second);
      s.items.erase(it);
      ++s.next;
      if (s.next - s.acked >= internal::kStreamWindow / 2) AckStreamLocked(s);
      return true;
    }
    if (!s.ended) {
      // Nothing to read: the producer may be waiting for this reader's progress.
      AckStreamLocked(s);
      return false;
    }
    // Throws the producer's error, after the values it yielded.
    internal::BytesView end = Get(end_ref, 0);
    uint64_t count = internal::Unpack<uint64_t>(end.data, end.size, "stream end");
    if (s.next >= count) {
      out->reset();
      return true;
    }
    if (!s.items.count(s.next))
      throw ObjectLostError("value " + std::to_string(s.next) + " of the " + std::to_string(count) +
                            " that call " + s.call.Hex() + " yielded never arrived");
  }
}

std::shared_ptr<internal::RefHolder> Runtime::NextStreamItem(internal::StreamReader& reader,
                                                             int64_t timeout_ms) {
  StreamState& s = reader.state();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::shared_ptr<internal::RefHolder> item;
  {
    MutexLock lock(&s.mu);
    if (TakeStreamItemLocked(s, *reader.end(), &item)) return item;
  }
  ObjectStore::BlockScope scope;  // a worker's call loop moves on while this waits
  MutexLock lock(&s.mu);
  while (!TakeStreamItemLocked(s, *reader.end(), &item)) {
    if (timeout_ms < 0) {
      s.cv.Wait(&s.mu);
    } else if (!s.cv.WaitUntil(&s.mu, deadline)) {
      throw GetTimeoutError("ObjectRefGenerator::Next timed out after " +
                            std::to_string(timeout_ms) + " ms waiting for value " +
                            std::to_string(s.next) + " of call " + s.call.Hex());
    }
  }
  return item;
}

// ------------------------------------------------------------------ the worker's side

void Runtime::OnStreamAck(const proto::StreamAckMsg& m) {
  if (m.call_id.size() != UniqueId::kSize)
    throw std::runtime_error("kStreamAck: a call id of " + std::to_string(m.call_id.size()) +
                             " bytes");
  MutexLock lock(&streams_mu_);
  auto it = producing_.find(ObjectId(UniqueId::FromBinary(m.call_id)));
  if (it == producing_.end()) return;
  it->second.acked = std::max(it->second.acked, std::min(m.consumed, it->second.sent));
  it->second.closed = it->second.closed || m.closed;
  producing_cv_.NotifyAll();
}

void Runtime::WakeProducers() {
  MutexLock lock(&streams_mu_);
  producing_cv_.NotifyAll();
}

void Runtime::EndProducing(const ObjectId& call) {
  MutexLock lock(&streams_mu_);
  producing_.erase(call);
}

// Takes the index of the next value of `call` when the window allows; throws
// TaskCancelledError when the call was cancelled or the caller dropped the stream.
bool Runtime::NextStreamIndexLocked(const ObjectId& call, uint64_t* index) {
  StreamProducer& p = producing_[call];
  if (p.closed) throw TaskCancelledError("the caller stopped reading the stream");
  if (IsCallCancelled(call)) throw TaskCancelledError("the stream was cancelled by its caller");
  if (p.sent - p.acked >= internal::kStreamWindow) return false;
  *index = p.sent++;
  return true;
}

uint64_t Runtime::WaitForStreamWindow(const ObjectId& call, const std::string& caller) {
  uint64_t index = 0;
  {
    MutexLock lock(&streams_mu_);
    if (NextStreamIndexLocked(call, &index)) return index;
  }
  ObjectStore::BlockScope scope;  // a worker's call loop moves on while this waits
  while (true) {
    {
      MutexLock lock(&streams_mu_);
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(kStreamProbeS);
      do {
        if (NextStreamIndexLocked(call, &index)) return index;
      } while (producing_cv_.WaitUntil(&streams_mu_, until));
    }
    // The caller has read nothing for a while: a caller that is gone never will.
    if (ProbeAddress(caller, 1000) == ProbeOutcome::kRefused)
      throw TaskCancelledError("the caller reading the stream is gone (" + caller + ")");
  }
}

void Runtime::EmitStreamItem(const std::function<std::string()>& pack) {
  CallResult* call = CurrentCallResult();
  if (call == nullptr) throw Error("a Stream's values are sent only by a call running remotely");
  uint64_t index = WaitForStreamWindow(call->id, call->owner);
  CallResult item{ObjectId::Random(), call->owner};
  std::string bytes;
  {
    ScopedCallResult scope(&item);
    bytes = pack();
  }
  proto::StreamItemMsg m;
  m.call_id = call->id.Binary();
  m.index = index;
  m.object_id = item.id.Binary();
  m.ack_to = address();
  if (item.stored) m.location = item.location;
  m.contained = ContainedRefs(item.contained);
  // The call's own thread: its reply goes after the values (transport::Send keeps one
  // thread's messages to a peer in order).
  transport::Send(call->owner, MsgType::kStreamItem, m, item.stored ? nullptr : &bytes);
}

}  // namespace orrery::runtime

namespace orrery::internal {

StreamReader::~StreamReader() {
  if (runtime::Runtime* rt = runtime::Current()) rt->CloseStream(*state_);
}

std::shared_ptr<StreamReader> OpenStream(std::shared_ptr<RefHolder> call) {
  return runtime::CurrentOrThrow().OpenStream(std::move(call));
}

std::shared_ptr<RefHolder> NextStreamItem(StreamReader& reader, int64_t timeout_ms) {
  return runtime::CurrentOrThrow().NextStreamItem(reader, timeout_ms);
}

const std::shared_ptr<RefHolder>& StreamEnd(const StreamReader& reader) { return reader.end(); }

void EmitStreamItem(const std::function<std::string()>& pack) {
  runtime::CurrentOrThrow().EmitStreamItem(pack);
}

}  // namespace orrery::internal
