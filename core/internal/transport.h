// ZeroMQ transport (docs/protocol.md).
//
// Every process that receives messages owns one Inbox: a ROUTER socket bound to an
// ephemeral TCP port (and a second one on a Unix socket for processes of this host and
// user: core/src/local_channel.h) and a thread that drains them and calls a handler. Sending is
// done from any thread with Send(address, ...), which uses a DEALER socket owned by the calling
// thread (one per destination, created on first use), so senders never contend on a lock and no
// thread hand-off sits on the call path. Replies are just messages sent to the caller's
// inbox address, which every request carries.
//
// Everything a peer can make this process hold is bounded (SendLimits): a thread keeps at
// most max_sockets_per_thread sockets and closes those idle for idle_close_s, and the bytes
// queued for peers that do not read them are capped per peer and in total. A send that
// would pass a bound is dropped, never blocks: TrySend says so to a caller that can report
// it, Send logs it (rate-limited).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "core/internal/protocol.h"
#include "core/internal/thread_annotations.h"
#include "orrery/status.h"

namespace orrery::transport {

namespace direct {
class Listener;
}  // namespace direct

// The process-wide ZeroMQ context. Never destroyed (sockets of exiting threads may outlive
// static destruction), so the process never blocks in zmq_ctx_term at exit.
zmq::context_t& Context();

struct Envelope {
  proto::MsgType type = proto::MsgType::kError;
  zmq::message_t frame0;   // header + meta
  zmq::message_t payload;  // empty when the message had none
  bool has_payload = false;
  std::string identity;  // the sending socket's ROUTER identity

  std::string_view meta() const {
    return std::string_view(static_cast<const char*>(frame0.data()) + proto::kHeaderSize,
                            frame0.size() - proto::kHeaderSize);
  }
  std::string PayloadString() const {
    return std::string(static_cast<const char*>(payload.data()), payload.size());
  }
  // The one way a handler decodes: the meta as T, or an InvalidArgument naming the message
  // type, which the handler returns for the inbox to answer (kError) and log.
  template <typename T>
  Status Decode(T* out) const {
    Status s = proto::DecodeMeta(meta(), out);
    if (s.ok()) return s;
    return Status::InvalidArgument(std::string("malformed ") + proto::TypeName(type) + ": " +
                                   s.message());
  }
};

// The address ZeroMQ gives for the sender of `frame` ("127.0.0.1" over TCP,
// "localhost:<uid>:<gid>:<pid>" over a Unix socket); "" when it has none.
std::string PeerAddress(const zmq::message_t& frame);

// For handlers: decodes env's meta as Msg and calls fn(msg), which returns void or Status;
// a meta that does not decode is the handler's failure.
template <typename Msg, typename Fn>
Status DecodeAnd(const Envelope& env, Fn&& fn) {
  Msg m;
  if (Status s = env.Decode(&m); !s.ok()) return s;
  if constexpr (std::is_void_v<std::invoke_result_t<Fn&, const Msg&>>) {
    fn(m);
    return Status::Ok();
  } else {
    return fn(m);
  }
}

class Inbox {
 public:
  // A handler returns what became of the message: a failed Status (bad input, an unknown
  // type) is answered with kError to the sender and logged, rate-limited; the inbox keeps
  // serving. There is no other error path: handlers throw nothing for bad input.
  using Handler = std::function<Status(Envelope&)>;

  Inbox();
  ~Inbox();
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  // Binds tcp://<host>:<port> (port 0: ephemeral). Advertised address uses `advertise_host`
  // when given (binding 0.0.0.0 for other hosts to reach).
  Status Bind(const std::string& host, int port = 0, const std::string& advertise_host = "");
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  // The same-host channel's endpoint (ipc://...), "" when it has none.
  const std::string& local_endpoint() const { return local_endpoint_; }
  void SetMaxMessageBytes(long long bytes) { max_message_bytes_ = bytes; }

  // Polls `fd` on the inbox thread; on_readable runs there. Call before Start() or from
  // the inbox thread.
  void AddFd(int fd, std::function<void()> on_readable);
  // Calls `tick` on the inbox thread about every `period_ms`.
  void SetTick(int period_ms, std::function<void()> tick);
  // Changes the tick period (thread-safe); takes effect after the next tick.
  void SetTickPeriod(int period_ms);

  // Starts the inbox thread. `handler` runs on it for every well-formed message; malformed
  // ones are answered with a kError and logged, and the inbox keeps serving. An exception
  // from the handler, the tick, a posted function or an fd callback is caught and logged
  // (rate-limited); the loop goes on.
  void Start(Handler handler, const std::string& thread_name = "orrery-inbox");
  // A handler that returns nothing: every message it takes counts as handled.
  template <typename F,
            typename = std::enable_if_t<std::is_void_v<std::invoke_result_t<F&, Envelope&>>>>
  void Start(F handler, const std::string& thread_name = "orrery-inbox") {
    Start(Handler([h = std::move(handler)](Envelope& env) mutable {
            h(env);
            return Status::Ok();
          }),
          thread_name);
  }
  // Runs `fn` on the inbox thread soon (thread-safe).
  void Post(std::function<void()> fn);
  // Stops and joins the thread. Idempotent.
  void Stop();
  // True on the thread that currently runs this inbox's loop.
  bool OwnsLoop() const;
  // Whether the loop's last pass read every message the socket held (false when it stopped
  // at its bound with more waiting). For the tick: a message missing while this is false
  // may be sitting unread in the socket.
  bool CaughtUp() const { return caught_up_; }
  // From inside a handler on the loop thread: a new thread takes the loop over (running
  // `first` before it polls), and this thread leaves the loop once its handler returns.
  // Lets a handler that runs user code block without stopping the inbox. An inbox that has
  // handed off is never stopped (its loop thread is detached); workers end with _exit.
  void HandOff(std::function<void()> first);

 private:
  void Loop();
  void RunLoop(uint64_t generation);
  void Wake();
  std::unique_ptr<zmq::socket_t> NewRouter();
  void BindLocal(const std::string& advertised_host);
  // Reads up to 1024 messages from `router` and handles them; false when the loop was
  // handed off meanwhile (the sockets are no longer this thread's).
  bool Drain(zmq::socket_t& router, std::vector<zmq::message_t>& frames, uint64_t generation);
  void HandleRaw(zmq::socket_t& router, std::vector<zmq::message_t>& frames);
  // Runs the handler on a well-formed message; a failure is answered with kError through
  // `router` when the message names its sender's identity, else logged.
  void Dispatch(zmq::socket_t& router, Envelope& env);
  // Serves the direct connections whose descriptors `revents` says are readable (up to 1024
  // messages); false when the loop was handed off meanwhile. *caught_up is cleared when
  // messages were left for the next pass.
  bool ServeDirect(const std::vector<zmq::pollitem_t>& items, size_t first, uint64_t generation,
                   bool* caught_up);
  // Runs `fn` (`what` names it in the log), catching whatever it throws.
  void Guarded(const char* what, const std::function<void()>& fn);
  void ReplyError(zmq::socket_t& router, const std::string& identity, const std::string& message);
  void RefuseVersion(zmq::socket_t& router, const std::string& identity,
                     const zmq::message_t& frame, const Status& why);

  std::unique_ptr<zmq::socket_t> router_;
  std::unique_ptr<zmq::socket_t> local_router_;  // the same-host channel; null when off
  std::string local_endpoint_;
  // The direct path's listener (core/src/direct_channel.h); null when off.
  std::unique_ptr<direct::Listener> direct_;
  uint64_t handshake_watch_ = 0;  // security::WatchHandshakes
  std::string address_;
  int port_ = 0;
  long long max_message_bytes_ = 512ll << 20;
  int wake_fd_ = -1;
  std::vector<std::pair<int, std::function<void()>>> fds_;
  std::atomic<int> tick_ms_{1000};
  std::atomic<bool> tick_changed_{false};
  std::function<void()> tick_;
  Handler handler_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> caught_up_{true};
  Mutex posted_mu_;
  std::vector<std::function<void()>> posted_ GUARDED_BY(posted_mu_);
};

// Bounds on the sending side of this process (docs/protocol.md "Limits").
struct SendLimits {
  int hwm_messages = 1 << 20;         // ZeroMQ high-water mark of each sending socket
  int64_t peer_bytes = 64ll << 20;    // queued, unsent bytes to one peer
  int64_t total_bytes = 512ll << 20;  // queued, unsent bytes to all peers together
  size_t max_sockets_per_thread = 256;
  double idle_close_s = 10;  // a socket unused this long is closed
  // A socket that must give way (to the cap above, or idle) while it still holds messages
  // (a slow CURVE handshake, a peer still starting) stays open outside the cap until they
  // are delivered, for at most drain_s (ZeroMQ's handshake timeout), and at most
  // max_draining_per_thread of them. Past drain_s its peer is probed (a connect to its
  // address): unless the connect is refused (nothing listens: the peer is gone), it gets
  // drain_s more, up to drain_max_s in all (a process swamped by a storm of handshakes on a
  // busy machine accepts late); past that, or refused, what it holds is dropped, with a
  // warning.
  double drain_s = 30;
  double drain_max_s = 600;
  size_t max_draining_per_thread = 4096;
};
// Applies to sockets opened afterwards (the byte caps: to every later send).
void SetSendLimits(const SendLimits& limits);
SendLimits GetSendLimits();

// Bytes queued and not yet handed to the kernel, over all peers (with a fixed per-frame
// overhead, so that many small messages count too).
int64_t QueuedBytes();
// The number of sending sockets the calling thread holds, not counting those draining
// (SendLimits::drain_s), which ThreadDrainingCount counts.
size_t ThreadSocketCount();
size_t ThreadDrainingCount();

// Whether a message must reach its peer in order with the calling thread's other messages
// to it (kKept: the default), or may overtake them or be overtaken (kAny: a call, which its
// worker orders by sequence number; the reply of a call that streamed nothing). A kAny
// message of at most direct::kMaxMessageBytes to a process of this host goes by the direct
// path when that peer admitted this thread's connection (core/src/direct_channel.h).
enum class Order { kKept, kAny };

// How many Order::kKept messages the calling thread has sent so far (to any peer): a message
// may take Order::kAny without overtaking one of them when this has not moved since the
// point it must come after.
uint64_t ThreadOrderedSends();

// Sends frame0 (+ payload) to the inbox at `address` from the calling thread, without
// blocking. Unavailable, with the message dropped, when the queue to that peer or all
// queues together are full: a message is queued when it fits under the caps, or when it is
// the only one queued (so that one large value always goes).
[[nodiscard]] Status TrySendFrames(const std::string& address, const std::string& frame0,
                                   const std::string* payload, Order order = Order::kKept);
// TrySendFrames for fire-and-forget messages: a drop is logged (rate-limited).
void SendFrames(const std::string& address, const std::string& frame0, const std::string* payload,
                Order order = Order::kKept);

template <typename Meta>
void Send(const std::string& address, proto::MsgType type, const Meta& meta,
          const std::string* payload = nullptr) {
  SendFrames(address, proto::EncodeFrame(type, meta), payload);
}

template <typename Meta>
[[nodiscard]] Status TrySend(const std::string& address, proto::MsgType type, const Meta& meta,
                             const std::string* payload = nullptr) {
  return TrySendFrames(address, proto::EncodeFrame(type, meta), payload);
}

// Removes the socket files of this process's inboxes' same-host channels: for a process
// about to end with _exit, which skips the destructors that would (a worker).
void RemoveLocalSockets();

// The process whose inbox was at `address` (tcp://...) has ended: removes that inbox's
// same-host channel socket file unless something listens on it (a node calls it for each
// worker it saw exit; the worker's own removal does not run when it is killed).
void ForgetLocalPeer(const std::string& address);

// Probes 16 socket files of the folder picked at random and removes those nobody has
// listened on for 2 s: a node calls it on each heartbeat, for the files of processes killed
// where no node saw them end (a node killed with its zygote and workers).
void SampleLocalSockets();

// Closes the calling thread's sending sockets (they close at thread exit anyway).
void CloseThreadSockets();
// Closes the calling thread's sockets that have been idle for SendLimits::idle_close_s.
// Every send does this too; inbox loops call it on every pass so that a thread that stops
// sending lets its sockets go.
void SweepThreadSockets();
// The peer at `address` is gone for good: every thread closes its socket to it on its next
// send, so ZeroMQ stops reconnecting to it.
void MarkPeerGone(const std::string& address);

}  // namespace orrery::transport
