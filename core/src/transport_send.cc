// The sending side of the transport (transport.h): per-thread DEALER sockets, bounded in
// number, in idle time and in the bytes they queue.
#include <algorithm>
#include <cstdio>
#include <list>
#include <optional>
#include <unordered_map>

#include "core/internal/clock.h"
#include "core/internal/connect_probe.h"
#include "core/internal/log.h"
#include "core/internal/rate_limit.h"
#include "core/internal/security.h"
#include "core/internal/thread_annotations.h"
#include "core/internal/transport.h"
#include "core/src/direct_channel.h"
#include "core/src/drain_probes.h"
#include "core/src/gone_peers.h"
#include "core/src/local_channel.h"
#include "core/src/tsan_handoff.h"

namespace orrery::transport {

zmq::context_t& Context() {
  static zmq::context_t* ctx = [] {
    auto* c = new zmq::context_t(1);
    c->set(zmq::ctxopt::max_sockets, 65536);
    return c;
  }();
  return *ctx;
}

namespace {

// A frame's bytes plus what ZeroMQ and this file keep per frame: counted so that a flood of
// small messages is bounded like a few large ones.
constexpr int64_t kFrameOverhead = 256;
// How long a closed socket may still try to deliver what it queued.
constexpr int kLingerMs = 2000;
// A draining socket's peer's answer (drain_probes.h) is awaited up to kProbeAnswerS past the
// socket's deadline (the prober's thread may have others queued first).
constexpr double kProbeAnswerS = 5.0;

Mutex g_limits_mu;
SendLimits g_limits GUARDED_BY(g_limits_mu);
std::atomic<uint64_t> g_limits_generation{1};
std::atomic<int64_t> g_total_bytes{0};
RateLimitedLog g_drop_log;

// The limits, as this thread last copied them (senders take no lock on the call path).
const SendLimits& Limits() {
  thread_local SendLimits copy;
  thread_local uint64_t seen = 0;
  uint64_t gen = g_limits_generation.load(std::memory_order_acquire);
  if (gen != seen) {
    MutexLock lock(&g_limits_mu);
    copy = g_limits;
    seen = gen;
  }
  return copy;
}

// Bytes queued to one peer; shared by its socket and the frames still in ZeroMQ's queues,
// which may outlive the socket (a closed socket lingers).
struct PeerQueue {
  std::atomic<int64_t> bytes{0};
};

// A frame handed to ZeroMQ without a copy; ZeroMQ frees it once written to the kernel or
// dropped, which is when its bytes stop counting.
struct Block {
  std::string data;
  std::shared_ptr<PeerQueue> peer;
  int64_t counted = 0;
};

void FreeBlock(void*, void* hint) {
  TakeOver(hint);
  auto* b = static_cast<Block*>(hint);
  b->peer->bytes.fetch_sub(b->counted, std::memory_order_relaxed);
  g_total_bytes.fetch_sub(b->counted, std::memory_order_relaxed);
  delete b;
}

zmq::message_t Frame(std::string data, const std::shared_ptr<PeerQueue>& peer) {
  auto* b = new Block{std::move(data), peer, 0};
  b->counted = int64_t(b->data.size()) + kFrameOverhead;
  peer->bytes.fetch_add(b->counted, std::memory_order_relaxed);
  g_total_bytes.fetch_add(b->counted, std::memory_order_relaxed);
  void* bytes = b->data.data();
  size_t size = b->data.size();
  HandOver(b);  // after this thread's last access to the block
  return zmq::message_t(bytes, size, FreeBlock, b);
}

// How often a sending socket over the same-host channel looks whether its peer's socket
// file was replaced (local::Replaced): an lstat at most once a millisecond per socket.
constexpr double kLocalCheckS = 0.001;

struct CachedSocket {
  std::unique_ptr<zmq::socket_t> socket;
  std::shared_ptr<PeerQueue> queue;
  std::list<std::string>::iterator lru;  // position in ThreadSockets::lru
  double last_used = 0;
  uint32_t sends = 0;        // counted up to kWatchedSends
  Status refused;            // the peer's version refusal, once it came
  local::Peer local;         // the Unix socket file it is connected to, if any
  double local_checked = 0;  // when that file was last looked at (local::Replaced)
  // The direct path to that peer, opened at the first Order::kAny message (null before).
  std::unique_ptr<direct::Sender> direct;
};

// A socket that gave way with messages still queued (SendLimits::drain_s).
struct DrainingSocket {
  std::unique_ptr<zmq::socket_t> socket;
  std::shared_ptr<PeerQueue> queue;
  double since = 0;    // when it gave way
  double until = 0;    // its deadline: drain_s after it gave way, later while its peer listens
  bool asked = false;  // a probe of its peer is under way
  local::Peer local;   // CachedSocket::local
};

RateLimitedLog g_drain_log;

void CloseNow(zmq::socket_t& socket) {
  socket.set(zmq::sockopt::linger, 0);
  socket.close();
}

// Set when this thread's ThreadSockets is destroyed: a thread that still sends after that
// (the main thread running atexit handlers, such as Shutdown's, after its thread_locals are
// gone) uses a process-wide set under g_late_mu instead. Not an annotated Mutex: whether it
// is taken depends on t_sockets_destroyed at run time (LateLock), which the analysis cannot
// follow.
thread_local bool t_sockets_destroyed = false;
std::mutex g_late_mu;

struct ThreadSockets {
  std::unordered_map<std::string, CachedSocket> sockets;
  std::list<std::string> lru;  // most recently used first
  std::unordered_map<std::string, DrainingSocket> draining;
  double drain_checked = 0;
  uint64_t gone_seen = 0;

  // Closes the socket to `address` with `linger_ms`, or, when `limits` is given and it
  // still holds messages, lets it drain (SendLimits::drain_s). One that holds messages for a
  // process of this host that has ended closes at once: nothing will take them, and
  // draining would keep its descriptor for drain_s (a head outliving hundreds of short-lived
  // drivers held dozens past its cap).
  void Close(const std::string& address, int linger_ms, const SendLimits* limits = nullptr) {
    auto it = sockets.find(address);
    if (it == sockets.end()) return;
    CachedSocket& c = it->second;
    bool holds = c.queue->bytes.load(std::memory_order_relaxed) > 0;
    if (holds && local::Ended(c.local)) {
      CloseNow(*c.socket);
    } else if (limits && limits->drain_s > 0 && limits->max_draining_per_thread > 0 && holds) {
      while (draining.size() >= limits->max_draining_per_thread) DropOldestDraining(*limits);
      double now = MonotonicSeconds();
      draining[address] =
          DrainingSocket{std::move(c.socket), c.queue, now, now + limits->drain_s, false, c.local};
    } else {
      c.socket->set(zmq::sockopt::linger, linger_ms);
      c.socket->close();
    }
    lru.erase(c.lru);
    sockets.erase(it);
  }
  // Closes draining sockets that delivered everything; drops what the ones past their
  // deadline still hold, unless their peer still listens.
  void CheckDraining(double now, const SendLimits& limits) {
    for (auto it = draining.begin(); it != draining.end();) {
      int64_t left = it->second.queue->bytes.load(std::memory_order_relaxed);
      if (left > 0 &&
          (now < it->second.until || StillListening(it->first, it->second, now, limits))) {
        ++it;
        continue;
      }
      if (left > 0) LogDropped(it->first, left, limits);
      CloseNow(*it->second.socket);
      it = draining.erase(it);
    }
  }
  // Past its deadline: true while the probe of its peer is under way (for a few seconds),
  // and unless the probe found nothing listening there (its deadline moves by drain_s, up to
  // drain_max_s).
  static bool StillListening(const std::string& address, DrainingSocket& d, double now,
                             const SendLimits& limits) {
    if (!d.asked) {
      d.asked = true;
      Probes().Ask(address);
      return true;
    }
    std::optional<ProbeOutcome> outcome = Probes().Take(address);
    if (!outcome) return now < d.until + kProbeAnswerS;  // its answer is still coming
    d.asked = false;
    // Only a refused connect proves the peer gone: one that timed out may be a listen queue
    // full of other connections (a storm of them to a swamped process).
    if (*outcome == ProbeOutcome::kRefused || now - d.since >= limits.drain_max_s) return false;
    d.until = std::min(now + limits.drain_s, d.since + limits.drain_max_s);
    return true;
  }
  void DropOldestDraining(const SendLimits& limits) {
    auto oldest = draining.begin();
    for (auto it = draining.begin(); it != draining.end(); ++it)
      if (it->second.since < oldest->second.since) oldest = it;
    LogDropped(oldest->first, oldest->second.queue->bytes.load(std::memory_order_relaxed), limits);
    CloseNow(*oldest->second.socket);
    draining.erase(oldest);
  }
  static void LogDropped(const std::string& address, int64_t bytes, const SendLimits& limits) {
    uint64_t suppressed = 0;
    if (!g_drain_log.ShouldLog(&suppressed)) return;
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%g", limits.drain_s);
    LOG_WARN("dropped about " + std::to_string(bytes) + " queued bytes to " + address +
             ": not delivered within " + seconds +
             " s of its socket giving way, and its peer is gone, does not answer, or took "
             "longer than the longest wait" +
             RateLimitedLog::More(suppressed));
  }
  ~ThreadSockets() {
    for (auto& [addr, s] : sockets) s.socket->close();
    for (auto& [addr, d] : draining) d.socket->close();
    t_sockets_destroyed = true;
  }
};

// The calling thread's sockets. `late` must hold g_late_mu when t_sockets_destroyed.
ThreadSockets& Sockets() {
  if (t_sockets_destroyed) {
    static auto* late = new ThreadSockets();  // never destroyed: used during exit
    return *late;
  }
  thread_local ThreadSockets sockets;
  return sockets;
}

// Locks g_late_mu for a thread whose own sockets are gone.
std::unique_lock<std::mutex> LateLock() {
  return t_sockets_destroyed ? std::unique_lock<std::mutex>(g_late_mu)
                             : std::unique_lock<std::mutex>();
}

void PurgeGone(ThreadSockets& ts) {
  GonePeers& gone = GonePeers::Process();
  if (gone.generation() == ts.gone_seen) return;
  ts.gone_seen = gone.Since(ts.gone_seen, [&ts](const std::string& addr) {
    ts.Close(addr, 0);
    if (auto d = ts.draining.find(addr); d != ts.draining.end()) {
      CloseNow(*d->second.socket);
      ts.draining.erase(d);
    }
  });
}

// Cheap enough for every send: it looks at the least recently used socket only, unless
// there are idle ones to close, and at the draining ones every 10 ms.
void SweepIdle(ThreadSockets& ts, double now, const SendLimits& limits) {
  while (!ts.lru.empty()) {
    auto it = ts.sockets.find(ts.lru.back());
    if (now - it->second.last_used < limits.idle_close_s) break;
    ts.Close(ts.lru.back(), kLingerMs, &limits);
  }
  if (!ts.draining.empty() && now - ts.drain_checked >= 0.01) {
    ts.drain_checked = now;
    ts.CheckDraining(now, limits);
  }
}

CachedSocket& SocketFor(const std::string& address, const SendLimits& limits) {
  ThreadSockets& ts = Sockets();
  PurgeGone(ts);
  double now = MonotonicSeconds();
  SweepIdle(ts, now, limits);
  auto it = ts.sockets.find(address);
  if (it != ts.sockets.end() && !it->second.local.path.empty() &&
      now - it->second.local_checked >= kLocalCheckS) {
    it->second.local_checked = now;
    if (local::Replaced(it->second.local)) {
      // A later process at the same address: what the socket holds was for the one that
      // ended, and the socket would reach the new one only at its next reconnect.
      ts.Close(address, 0);
      it = ts.sockets.end();
    }
  }
  if (it != ts.sockets.end()) {
    ts.lru.splice(ts.lru.begin(), ts.lru, it->second.lru);
    it->second.last_used = now;
    return it->second;
  }
  // The least recently used socket with nothing queued makes room; failing that, the least
  // recently used one, which drains what it holds.
  while (!ts.lru.empty() &&
         ts.sockets.size() >= std::max<size_t>(1, limits.max_sockets_per_thread)) {
    std::string victim = ts.lru.back();
    int looked = 0;
    for (auto it = ts.lru.rbegin(); it != ts.lru.rend() && looked < 32; ++it, ++looked) {
      if (ts.sockets[*it].queue->bytes.load(std::memory_order_relaxed) == 0) {
        victim = *it;
        break;
      }
    }
    ts.Close(victim, kLingerMs, &limits);
  }
  std::unique_ptr<zmq::socket_t> s;
  std::shared_ptr<PeerQueue> queue;
  local::Peer local;
  if (auto d = ts.draining.find(address);
      d != ts.draining.end() && local::Replaced(d->second.local)) {
    CloseNow(*d->second.socket);  // what it holds was for the process that ended
    ts.draining.erase(d);
  }
  if (auto d = ts.draining.find(address); d != ts.draining.end()) {
    // Still draining: back into use, so that a new socket cannot overtake what it holds.
    s = std::move(d->second.socket);
    queue = std::move(d->second.queue);
    local = d->second.local;
    ts.draining.erase(d);
  } else {
    s = std::make_unique<zmq::socket_t>(Context(), zmq::socket_type::dealer);
    s->set(zmq::sockopt::sndhwm, std::max(1, limits.hwm_messages));
    s->set(zmq::sockopt::linger, kLingerMs);
    s->set(zmq::sockopt::reconnect_ivl, 100);
    s->set(zmq::sockopt::reconnect_ivl_max, 5000);  // back off from peers that are gone
    local = local::Connect(*s, address);            // a peer of this host and user: its Unix socket
    queue = std::make_shared<PeerQueue>();
  }
  ts.lru.push_front(address);
  CachedSocket& c = ts.sockets[address];
  c.socket = std::move(s);
  c.queue = std::move(queue);
  c.lru = ts.lru.begin();
  c.last_used = now;
  c.local = std::move(local);
  c.local_checked = now;
  return c;
}

// Whether `bytes` more may be queued: under both caps, or nothing queued at all.
Status Admit(const std::string& address, const PeerQueue& peer, int64_t bytes,
             const SendLimits& limits) {
  int64_t queued = peer.bytes.load(std::memory_order_relaxed);
  if (queued > 0 && queued + bytes > limits.peer_bytes) {
    return Status::Unavailable("the send queue to " + address + " is full (" +
                               std::to_string(queued) + " bytes not yet delivered; the limit is " +
                               std::to_string(limits.peer_bytes) + ")");
  }
  int64_t total = g_total_bytes.load(std::memory_order_relaxed);
  if (total > 0 && total + bytes > limits.total_bytes) {
    return Status::Unavailable("this process's send queues are full (" + std::to_string(total) +
                               " bytes not yet delivered; the limit is " +
                               std::to_string(limits.total_bytes) + ")");
  }
  return Status::Ok();
}

// A peer of another protocol version answers a connection's frames with a version refusal
// (protocol_wire.h), which comes back on the sending socket. A socket's first kWatchedSends
// sends look for it (any other frame that comes back, an error reply the peer also logged,
// is dropped); once it came, every send on that socket fails with it.
constexpr uint32_t kWatchedSends = 256;
constexpr int kMaxReadBack = 16;

Status CheckRefused(const std::string& address, CachedSocket& c) {
  if (!c.refused.ok()) return c.refused;
  if (c.sends >= kWatchedSends) return Status::Ok();
  ++c.sends;
  for (int i = 0; i < kMaxReadBack && (c.socket->get(zmq::sockopt::events) & ZMQ_POLLIN); ++i) {
    zmq::message_t m;
    if (!c.socket->recv(m, zmq::recv_flags::dontwait)) break;
    if (auto refusal = proto::DecodeVersionRefusal(m.data(), m.size(), "the peer at " + address)) {
      c.refused = *refusal;
      return c.refused;
    }
  }
  return Status::Ok();
}

// Order::kKept messages the calling thread sent (ThreadOrderedSends).
thread_local uint64_t t_ordered_sends = 0;

// Sends over `c`'s direct path when it has one that takes the message now.
bool SentDirectly(CachedSocket& c, const std::string& frame0, const std::string* payload) {
  if (c.local.path.empty()) return false;
  if (!c.direct) c.direct = std::make_unique<direct::Sender>(c.local.path + direct::kSuffix);
  return c.direct->Send(frame0, payload) == direct::Sender::Outcome::kSent;
}

}  // namespace

void SetSendLimits(const SendLimits& limits) {
  MutexLock lock(&g_limits_mu);
  g_limits = limits;
  g_limits_generation.fetch_add(1, std::memory_order_release);
}

SendLimits GetSendLimits() { return Limits(); }

int64_t QueuedBytes() { return g_total_bytes.load(std::memory_order_relaxed); }

size_t ThreadSocketCount() {
  auto late = LateLock();
  return Sockets().sockets.size();
}

size_t ThreadDrainingCount() {
  auto late = LateLock();
  return Sockets().draining.size();
}

uint64_t ThreadOrderedSends() { return t_ordered_sends; }

Status TrySendFrames(const std::string& address, const std::string& frame0,
                     const std::string* payload, Order order) {
  const SendLimits& limits = Limits();
  auto late = LateLock();
  try {
    CachedSocket& c = SocketFor(address, limits);
    if (Status refused = CheckRefused(address, c); !refused.ok()) return refused;
    if (order == Order::kAny && SentDirectly(c, frame0, payload)) return Status::Ok();
    if (order == Order::kKept) ++t_ordered_sends;
    int64_t bytes = int64_t(frame0.size()) + kFrameOverhead +
                    (payload ? int64_t(payload->size()) + kFrameOverhead : 0);
    Status admitted = Admit(address, *c.queue, bytes, limits);
    if (!admitted.ok()) return admitted;
    zmq::message_t f0 = Frame(frame0, c.queue);
    if (!payload) {
      if (!c.socket->send(f0, zmq::send_flags::dontwait)) {
        return Status::Unavailable("the send queue to " + address + " is full (" +
                                   std::to_string(limits.hwm_messages) +
                                   " messages not yet delivered)");
      }
      return Status::Ok();
    }
    if (!c.socket->send(f0, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      return Status::Unavailable("the send queue to " + address + " is full (" +
                                 std::to_string(limits.hwm_messages) +
                                 " messages not yet delivered)");
    }
    // A message's later frames are always accepted once its first one was.
    zmq::message_t f1 = Frame(*payload, c.queue);
    c.socket->send(f1, zmq::send_flags::dontwait);
    return Status::Ok();
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument("cannot send to " + address + ": " + e.what());
  }
}

void SendFrames(const std::string& address, const std::string& frame0, const std::string* payload,
                Order order) {
  Status s = TrySendFrames(address, frame0, payload, order);
  uint64_t suppressed = 0;
  if (!s.ok() && g_drop_log.ShouldLog(&suppressed)) {
    LOG_WARN("dropped a message: " + s.message() + RateLimitedLog::More(suppressed));
  }
}

void CloseThreadSockets() {
  auto late = LateLock();
  ThreadSockets& ts = Sockets();
  for (auto& [addr, s] : ts.sockets) s.socket->close();
  for (auto& [addr, d] : ts.draining) d.socket->close();
  ts.sockets.clear();
  ts.lru.clear();
  ts.draining.clear();
}

void SweepThreadSockets() {
  auto late = LateLock();
  ThreadSockets& ts = Sockets();
  const SendLimits& limits = Limits();
  PurgeGone(ts);
  ts.drain_checked = 0;  // now, whatever the last check
  SweepIdle(ts, MonotonicSeconds(), limits);
}

void MarkPeerGone(const std::string& address) {
  if (!address.empty()) GonePeers::Process().Mark(address);
}

}  // namespace orrery::transport
