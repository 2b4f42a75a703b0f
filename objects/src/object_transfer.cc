// The data channel's key and its server (object_transfer.h; the wire format and the limits
// are in object_transfer_wire.h and docs/protocol.md "Object transfer").
//
// Threads: one acceptor, one thread per connection (at most kMaxConnections). Every wait of
// every thread is bounded (handshake 5 s, idle 30 s) and also ends when Stop writes the
// server's eventfd, so Stop can join them all.
#include "objects/internal/object_transfer.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sodium.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <thread>

#include "core/internal/clock.h"
#include "core/internal/log.h"
#include "core/internal/rate_limit.h"
#include "core/internal/security.h"
#include "core/internal/thread_annotations.h"
#include "objects/internal/object_transfer_wire.h"

namespace orrery::objects {

using transfer::Bounds;

TransferKey ProcessTransferKey() {
  security::Credentials creds = security::ProcessCredentials();
  if (!creds.enabled) return {};
  // HMAC-SHA256(secret key, label): a key of its own for the data channel, so nothing learnt
  // about one use of the cluster's secret helps against the other.
  static const char kLabel[] = "orrery object transfer key v1";
  if (sodium_init() < 0) LOG_ERROR("libsodium could not be initialised");
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, reinterpret_cast<const unsigned char*>(creds.secret_key.data()),
                              creds.secret_key.size());
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(kLabel),
                                sizeof(kLabel) - 1);
  unsigned char out[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&st, out);
  TransferKey key{true, std::string(reinterpret_cast<const char*>(out), sizeof(out))};
  sodium_memzero(out, sizeof(out));
  sodium_memzero(&st, sizeof(st));
  return key;
}

struct ObjectServer::State {
  State(Lookup l, TransferKey k) : lookup(std::move(l)), key(std::move(k)) {}

  struct Conn {
    std::thread thread;
    std::atomic<bool> done{false};
  };

  const Lookup lookup;
  const TransferKey key;
  transfer::ServerLimits limits;  // set in Start
  Mutex mu;
  bool started GUARDED_BY(mu) = false;
  bool stopped GUARDED_BY(mu) = false;
  std::string address GUARDED_BY(mu);
  Mutex stop_mu;  // held through Stop, so a second caller returns only when all is joined
  // Set in Start before the acceptor starts, closed in Stop after every thread is joined.
  int listen_fd = -1;
  int wake_fd = -1;  // eventfd: written once by Stop, never read, so every poll sees it
  std::atomic<bool> stopping{false};
  std::thread acceptor;
  // The acceptor's alone while it runs; Stop's after it joined the acceptor.
  std::list<std::unique_ptr<Conn>> conns;
  // Lines a peer can trigger, at most one per 5 s each (as the control plane's refusals).
  RateLimitedLog refused_log{5.0};  // peers that failed the handshake or broke the protocol
  RateLimitedLog busy_log{5.0};     // connections refused for the connection limit
  RateLimitedLog accept_log{5.0};   // accept() errors (out of descriptors)

  void AcceptLoop();
  void Serve(int fd);
  void Reap();
  void Warn(RateLimitedLog& limiter, const std::string& line);
};

namespace {

std::string PeerName(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof(host), port, sizeof(port),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  return std::string(host) + ":" + port;
}

transfer::ReplyStatus LookupStatus(const Status& s) {
  return s.code() == StatusCode::kNotFound ? transfer::ReplyStatus::kNotFound
                                           : transfer::ReplyStatus::kInternal;
}

}  // namespace

void ObjectServer::State::Warn(RateLimitedLog& limiter, const std::string& line) {
  uint64_t suppressed = 0;
  if (limiter.ShouldLog(&suppressed)) {
    LOG_WARN("object server: " + line + RateLimitedLog::More(suppressed));
  }
}

void ObjectServer::State::Reap() {
  for (auto it = conns.begin(); it != conns.end();) {
    if ((*it)->done.load()) {
      (*it)->thread.join();
      it = conns.erase(it);
    } else {
      ++it;
    }
  }
}

void ObjectServer::State::AcceptLoop() {
  while (!stopping.load()) {
    pollfd fds[2] = {{listen_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) break;
    if (fds[1].revents) break;
    if (!fds[0].revents) continue;
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        Warn(accept_log, std::string("accept: ") + strerror(errno));
        pollfd wake{wake_fd, POLLIN, 0};
        (void)poll(&wake, 1, 100);  // the error persists until a descriptor frees: back off
      }
      continue;
    }
    Reap();
    if (conns.size() >= size_t(limits.max_connections)) {
      Warn(busy_log, "refused a connection from " + PeerName(fd) + ": " +
                         std::to_string(limits.max_connections) + " connections open");
      transfer::ServerHello busy;
      busy.status = transfer::HelloStatus::kBusy;
      char buf[transfer::ServerHello::kSize];
      transfer::Encode(busy, buf);
      (void)send(fd, buf, sizeof(buf), MSG_NOSIGNAL | MSG_DONTWAIT);  // fits a new socket's buffer
      close(fd);
      continue;
    }
    transfer::ConfigureSocket(fd);
    auto conn = std::make_unique<Conn>();
    Conn* c = conn.get();
    try {
      conn->thread = std::thread([this, c, fd] {
        Serve(fd);
        c->done.store(true);
      });
      conns.push_back(std::move(conn));
    } catch (const std::system_error& e) {  // no thread to be had: refuse this one
      Warn(accept_log, std::string("cannot start a connection thread: ") + e.what());
      close(fd);
    }
  }
}

// One connection: the handshake, then requests answered in order until the client leaves, idles
// for limits.idle_timeout_ms, breaks the protocol, or Stop. Owns fd and closes it.
void ObjectServer::State::Serve(int fd) {
  Bounds handshake{limits.handshake_timeout_ms,
                   MonotonicSeconds() + limits.handshake_timeout_ms / 1000.0, wake_fd, &stopping};
  Status s = transfer::ServerHandshake(fd, key, handshake);
  if (!s.ok()) {
    if (s.code() == StatusCode::kPermissionDenied || s.code() == StatusCode::kInvalidArgument) {
      Warn(refused_log, "dropped " + PeerName(fd) + " in the handshake: " + s.message());
    } else if (s.code() != StatusCode::kCancelled) {
      LOG_DEBUG("object server: " + PeerName(fd) + " left in the handshake: " + s.message());
    }
    close(fd);
    return;
  }
  Bounds idle{limits.idle_timeout_ms, 0, wake_fd, &stopping};  // no deadline while sending
  char in[transfer::Request::kSize], out[transfer::Reply::kSize];
  for (;;) {
    // The whole header within the idle timeout: trickling bytes does not keep a connection.
    idle.deadline = MonotonicSeconds() + limits.idle_timeout_ms / 1000.0;
    if (!transfer::RecvExact(fd, in, sizeof(in), idle).ok()) break;  // left, idle or Stop
    idle.deadline = 0;
    transfer::Request req;
    if (Status d = transfer::Decode(in, &req); !d.ok()) {
      Warn(refused_log, "dropped " + PeerName(fd) + ": " + d.message());
      break;
    }
    transfer::Reply rep;
    rep.id = req.id;
    rep.offset = req.offset;
    rep.length = req.length;
    Result<ObjectBytes> bytes = Status::Internal("lookup threw");
    try {
      bytes = lookup(req.id);
    } catch (const std::exception& e) {
      bytes = Status::Internal(std::string("lookup threw: ") + e.what());
    }
    iovec iov[2] = {{out, sizeof(out)}, {nullptr, 0}};
    bool drop = false;
    if (bytes.ok() && bytes->data == nullptr && bytes->size > 0) {
      bytes = Status::Internal("lookup returned no bytes");
    }
    if (!bytes.ok()) {
      rep.status = LookupStatus(bytes.status());
    } else {
      rep.object_size = bytes->size;
      if (req.length > transfer::kMaxRequestBytes || req.offset > bytes->size ||
          req.length > bytes->size - req.offset) {
        rep.status = transfer::ReplyStatus::kBadRequest;
        drop = true;
        Warn(refused_log, "dropped " + PeerName(fd) + ": request of [" +
                              std::to_string(req.offset) + ", +" + std::to_string(req.length) +
                              ") of an object of " + std::to_string(bytes->size) + " bytes");
      } else {
        iov[1] = {const_cast<char*>(bytes->data) + req.offset, size_t(req.length)};
      }
    }
    transfer::Encode(rep, out);
    if (!transfer::SendAll(fd, iov, 2, idle).ok() || drop) break;
  }
  close(fd);
}

ObjectServer::ObjectServer(Lookup lookup, TransferKey key)
    : state_(std::make_shared<State>(std::move(lookup), std::move(key))) {}

ObjectServer::~ObjectServer() { Stop(); }

Status ObjectServer::Start(const std::string& bind_host, const std::string& advertise_host) {
  MutexLock lock(&state_->mu);
  if (state_->started || state_->stopped) {
    return Status::InvalidArgument("object server: already started or stopped");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(bind_host.c_str(), "0", &hints, &res);
  if (rc != 0) {
    return Status::InvalidArgument("object server: cannot resolve '" + bind_host +
                                   "': " + gai_strerror(rc));
  }
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 128) != 0) {
    Status err = Status::Unavailable("object server: cannot listen on " + bind_host + ": " +
                                     strerror(errno));
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return err;
  }
  freeaddrinfo(res);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  uint16_t port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                                 : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake < 0) {
    close(fd);
    return Status::Unavailable(std::string("object server: eventfd: ") + strerror(errno));
  }
  std::string host = advertise_host.empty() ? bind_host : advertise_host;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  state_->address = host + ":" + std::to_string(port);
  state_->limits = transfer::GetServerLimits();
  state_->listen_fd = fd;
  state_->wake_fd = wake;
  state_->started = true;
  state_->acceptor = std::thread([s = state_.get()] { s->AcceptLoop(); });
  LOG_DEBUG("object server: serving on " + state_->address);
  return Status::Ok();
}

std::string ObjectServer::address() const {
  MutexLock lock(&state_->mu);
  return state_->address;
}

void ObjectServer::Stop() {
  MutexLock stop_lock(&state_->stop_mu);
  {
    MutexLock lock(&state_->mu);
    bool was_running = state_->started && !state_->stopped;
    state_->stopped = true;
    if (!was_running) return;
  }
  State& s = *state_;
  s.stopping.store(true);
  uint64_t one = 1;
  if (write(s.wake_fd, &one, sizeof(one)) != ssize_t(sizeof(one))) {
    LOG_ERROR("object server: cannot wake its threads: " + std::string(strerror(errno)));
  }
  s.acceptor.join();
  for (auto& c : s.conns) c->thread.join();
  s.conns.clear();
  close(s.listen_fd);
  close(s.wake_fd);
  s.listen_fd = s.wake_fd = -1;
}

}  // namespace orrery::objects
