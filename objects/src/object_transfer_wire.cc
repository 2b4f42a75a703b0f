// The data channel's frames, MACs and bounded socket I/O (object_transfer_wire.h).
#include "objects/internal/object_transfer_wire.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sodium.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/internal/clock.h"
#include "core/internal/thread_annotations.h"

namespace orrery::objects::transfer {

namespace {

void EnsureSodium() {
  static const int rc = sodium_init();  // 0, or 1 when already initialised; -1 never seen
  (void)rc;
}

// Little-endian field writers and readers over a fixed-size frame buffer.
class Out {
 public:
  explicit Out(char* p) : p_(reinterpret_cast<uint8_t*>(p)) {}
  void U16(uint16_t v) { Uint(v, 2); }
  void U32(uint32_t v) { Uint(v, 4); }
  void U64(uint64_t v) { Uint(v, 8); }
  void Bytes(const uint8_t* b, size_t n) {
    std::memcpy(p_, b, n);
    p_ += n;
  }

 private:
  void Uint(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) *p_++ = uint8_t(v >> (8 * i));
  }
  uint8_t* p_;
};

class In {
 public:
  explicit In(const char* p) : p_(reinterpret_cast<const uint8_t*>(p)) {}
  uint16_t U16() { return uint16_t(Uint(2)); }
  uint32_t U32() { return uint32_t(Uint(4)); }
  uint64_t U64() { return Uint(8); }
  void Bytes(uint8_t* b, size_t n) {
    std::memcpy(b, p_, n);
    p_ += n;
  }
  ObjectId Id() {
    std::string bin(reinterpret_cast<const char*>(p_), ObjectId::kSize);
    p_ += ObjectId::kSize;
    return ObjectId(UniqueId::FromBinary(bin));
  }

 private:
  uint64_t Uint(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(*p_++) << (8 * i);
    return v;
  }
  const uint8_t* p_;
};

// The magic and version every frame starts with.
Status CheckStart(In& in, uint32_t magic, const char* frame) {
  uint32_t got = in.U32();
  if (got != magic) {
    return Status::InvalidArgument(std::string("bad magic in a ") + frame + " frame (0x" + [&] {
      char b[16];
      std::snprintf(b, sizeof(b), "%08x", got);
      return std::string(b);
    }() + ")");
  }
  uint16_t version = in.U16();
  if (version != kVersion) {
    return Status::InvalidArgument(std::string("unsupported version ") + std::to_string(version) +
                                   " in a " + frame + " frame (this side speaks " +
                                   std::to_string(kVersion) + ")");
  }
  return Status::Ok();
}

Status BadField(const char* frame, const char* field, uint64_t value) {
  return Status::InvalidArgument(std::string("bad ") + field + " " + std::to_string(value) +
                                 " in a " + frame + " frame");
}

Mac Hmac(const std::string& key, const char* label, const Nonce& a, const Nonce& b) {
  EnsureSodium();
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, reinterpret_cast<const unsigned char*>(key.data()), key.size());
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(label),
                                std::strlen(label));
  crypto_auth_hmacsha256_update(&st, a.data(), a.size());
  crypto_auth_hmacsha256_update(&st, b.data(), b.size());
  Mac out;
  crypto_auth_hmacsha256_final(&st, out.data());
  sodium_memzero(&st, sizeof(st));
  return out;
}

// Socket buffer size for both directions; 0 leaves the kernel's autotuning on. See
// SetSocketBufferBytes.
std::atomic<int> g_socket_buffer_bytes{0};

}  // namespace

void Encode(const ServerHello& m, char* out) {
  Out o(out);
  o.U32(ServerHello::kMagic);
  o.U16(kVersion);
  o.U16(uint16_t(m.status));
  o.U16(m.flags);
  o.U16(0);
  o.Bytes(m.nonce.data(), m.nonce.size());
}

void Encode(const ClientHello& m, char* out) {
  Out o(out);
  o.U32(ClientHello::kMagic);
  o.U16(kVersion);
  o.U16(m.flags);
  o.Bytes(m.nonce.data(), m.nonce.size());
  o.Bytes(m.mac.data(), m.mac.size());
}

void Encode(const ServerAccept& m, char* out) {
  Out o(out);
  o.U32(ServerAccept::kMagic);
  o.U16(kVersion);
  o.U16(uint16_t(m.status));
  o.Bytes(m.mac.data(), m.mac.size());
}

void Encode(const Request& m, char* out) {
  Out o(out);
  o.U32(Request::kMagic);
  o.U16(kVersion);
  o.U16(0);
  o.Bytes(m.id.data(), ObjectId::kSize);
  o.U64(m.offset);
  o.U64(m.length);
}

void Encode(const Reply& m, char* out) {
  Out o(out);
  o.U32(Reply::kMagic);
  o.U16(kVersion);
  o.U16(uint16_t(m.status));
  o.Bytes(m.id.data(), ObjectId::kSize);
  o.U64(m.offset);
  o.U64(m.length);
  o.U64(m.object_size);
}

Status Decode(const char* in, ServerHello* m) {
  In i(in);
  if (Status s = CheckStart(i, ServerHello::kMagic, "server hello"); !s.ok()) return s;
  uint16_t status = i.U16();
  if (status > uint16_t(HelloStatus::kBusy)) return BadField("server hello", "status", status);
  m->status = HelloStatus(status);
  m->flags = i.U16();
  if (m->flags & ~kFlagAuth) return BadField("server hello", "flags", m->flags);
  if (uint16_t reserved = i.U16()) return BadField("server hello", "reserved field", reserved);
  i.Bytes(m->nonce.data(), m->nonce.size());
  return Status::Ok();
}

Status Decode(const char* in, ClientHello* m) {
  In i(in);
  if (Status s = CheckStart(i, ClientHello::kMagic, "client hello"); !s.ok()) return s;
  m->flags = i.U16();
  if (m->flags & ~kFlagAuth) return BadField("client hello", "flags", m->flags);
  i.Bytes(m->nonce.data(), m->nonce.size());
  i.Bytes(m->mac.data(), m->mac.size());
  return Status::Ok();
}

Status Decode(const char* in, ServerAccept* m) {
  In i(in);
  if (Status s = CheckStart(i, ServerAccept::kMagic, "server accept"); !s.ok()) return s;
  uint16_t status = i.U16();
  if (status > uint16_t(AcceptStatus::kAuthMismatch)) {
    return BadField("server accept", "status", status);
  }
  m->status = AcceptStatus(status);
  i.Bytes(m->mac.data(), m->mac.size());
  return Status::Ok();
}

Status Decode(const char* in, Request* m) {
  In i(in);
  if (Status s = CheckStart(i, Request::kMagic, "request"); !s.ok()) return s;
  if (uint16_t reserved = i.U16()) return BadField("request", "reserved field", reserved);
  m->id = i.Id();
  m->offset = i.U64();
  m->length = i.U64();
  return Status::Ok();
}

Status Decode(const char* in, Reply* m) {
  In i(in);
  if (Status s = CheckStart(i, Reply::kMagic, "reply"); !s.ok()) return s;
  uint16_t status = i.U16();
  if (status > uint16_t(ReplyStatus::kInternal)) return BadField("reply", "status", status);
  m->status = ReplyStatus(status);
  m->id = i.Id();
  m->offset = i.U64();
  m->length = i.U64();
  m->object_size = i.U64();
  return Status::Ok();
}

Nonce RandomNonce() {
  EnsureSodium();
  Nonce n;
  randombytes_buf(n.data(), n.size());
  return n;
}

Mac ClientMac(const std::string& key, const Nonce& server_nonce, const Nonce& client_nonce) {
  return Hmac(key, "orrery object transfer v1: client", server_nonce, client_nonce);
}

Mac ServerMac(const std::string& key, const Nonce& server_nonce, const Nonce& client_nonce) {
  return Hmac(key, "orrery object transfer v1: server", server_nonce, client_nonce);
}

bool MacEquals(const Mac& a, const Mac& b) {
  return sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

namespace {

// Waits until fd may be ready for `events`, or a slice passed (the caller retries its call and
// comes back), or a bound is hit (the error to return).
Status Wait(int fd, short events, const Bounds& b, double last_progress) {
  for (;;) {
    if (b.stop && b.stop->load(std::memory_order_relaxed)) return Status::Cancelled("stopped");
    if (b.cancel && b.cancel->load(std::memory_order_relaxed)) {
      return Status::Cancelled("cancelled");
    }
    double now = MonotonicSeconds();
    double left = last_progress + b.stall_ms / 1000.0 - now;
    if (left <= 0) {
      return Status::Unavailable("stalled: nothing moved for " + std::to_string(b.stall_ms) +
                                 " ms");
    }
    if (b.deadline > 0) {
      if (b.deadline <= now) return Status::Unavailable("deadline passed");
      left = std::min(left, b.deadline - now);
    }
    int timeout_ms = int(std::min(left * 1000.0, 3.6e6)) + 1;
    if (b.stop || b.cancel) timeout_ms = std::min(timeout_ms, kCancelSliceMs);
    pollfd fds[2] = {{fd, events, 0}, {b.wake_fd, POLLIN, 0}};
    int n = poll(fds, b.wake_fd >= 0 ? 2 : 1, timeout_ms);
    if (n < 0 && errno != EINTR)
      return Status::Unavailable(std::string("poll: ") + strerror(errno));
    if (n > 0 && b.wake_fd >= 0 && fds[1].revents) return Status::Cancelled("stopped");
    if (n > 0) return Status::Ok();  // ready, hung up or failed: the next call says which
  }
}

Status SocketError(const char* what) {
  return Status::Unavailable(std::string(what) + ": " + strerror(errno));
}

}  // namespace

Status RecvExact(int fd, char* buf, size_t n, const Bounds& bounds) {
  size_t got = 0;
  double last = MonotonicSeconds();
  while (got < n) {
    if (bounds.stop && bounds.stop->load(std::memory_order_relaxed)) {
      return Status::Cancelled("stopped");
    }
    ssize_t r = recv(fd, buf + got, n - got, 0);
    if (r > 0) {
      got += size_t(r);
      last = MonotonicSeconds();
      continue;
    }
    if (r == 0) return Status::Unavailable("the peer closed the connection");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return SocketError("recv");
    if (Status s = Wait(fd, POLLIN, bounds, last); !s.ok()) return s;
  }
  return Status::Ok();
}

Status SendAll(int fd, iovec* iov, int iovcnt, const Bounds& bounds) {
  double last = MonotonicSeconds();
  while (iovcnt > 0) {
    if (iov->iov_len == 0) {
      ++iov;
      --iovcnt;
      continue;
    }
    if (bounds.stop && bounds.stop->load(std::memory_order_relaxed)) {
      return Status::Cancelled("stopped");
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = size_t(iovcnt);
    ssize_t r = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (r > 0) {
      size_t left = size_t(r);
      while (iovcnt > 0 && left >= iov->iov_len) {
        left -= iov->iov_len;
        ++iov;
        --iovcnt;
      }
      if (iovcnt > 0) {
        iov->iov_base = static_cast<char*>(iov->iov_base) + left;
        iov->iov_len -= left;
      }
      last = MonotonicSeconds();
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return SocketError("send");
    if (Status s = Wait(fd, POLLOUT, bounds, last); !s.ok()) return s;
  }
  return Status::Ok();
}

Status SendBytes(int fd, const char* buf, size_t n, const Bounds& bounds) {
  iovec iov{const_cast<char*>(buf), n};
  return SendAll(fd, &iov, 1, bounds);
}

namespace {
Mutex g_limits_mu;
ServerLimits g_limits GUARDED_BY(g_limits_mu);
}  // namespace

void SetServerLimits(const ServerLimits& limits) {
  MutexLock lock(&g_limits_mu);
  g_limits = limits;
}

ServerLimits GetServerLimits() {
  MutexLock lock(&g_limits_mu);
  return g_limits;
}

void SetSocketBufferBytes(int bytes) { g_socket_buffer_bytes.store(std::max(bytes, 0)); }

void ConfigureSocket(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // Setting SO_RCVBUF turns the kernel's receive autotuning off (and is capped by rmem_max),
  // so a fixed size is only applied when asked for.
  if (int bytes = g_socket_buffer_bytes.load(); bytes > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  }
}

Status SplitAddress(const std::string& address, std::string* host, uint16_t* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return Status::InvalidArgument("address '" + address + "' is not host:port");
  }
  std::string h = address.substr(0, colon), p = address.substr(colon + 1);
  if (h.front() == '[') {
    if (h.size() < 3 || h.back() != ']') {
      return Status::InvalidArgument("address '" + address + "': bad bracketed host");
    }
    h = h.substr(1, h.size() - 2);
  } else if (h.find(':') != std::string::npos) {
    return Status::InvalidArgument("address '" + address + "': an IPv6 host needs brackets");
  }
  if (p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(p) == 0 || std::stoul(p) > 65535) {
    return Status::InvalidArgument("address '" + address + "': bad port");
  }
  *host = h;
  *port = uint16_t(std::stoul(p));
  return Status::Ok();
}

Result<int> Connect(const std::string& address, int timeout_ms, const Bounds& bounds) {
  std::string host;
  uint16_t port = 0;
  if (Status s = SplitAddress(address, &host, &port); !s.ok()) return s;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    return Status::Unavailable("cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  Status last = Status::Unavailable("no address for '" + host + "'");
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last = SocketError("socket");
      continue;
    }
    ConfigureSocket(fd);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
      Bounds b = bounds;
      b.stall_ms = timeout_ms;
      int err = 0;
      socklen_t len = sizeof(err);
      last = Wait(fd, POLLOUT, b, MonotonicSeconds());
      if (last.ok() && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
        freeaddrinfo(res);
        return fd;
      }
      if (last.ok()) last = Status::Unavailable("connect to " + address + ": " + strerror(err));
      if (last.code() == StatusCode::kUnavailable && last.message().rfind("connect", 0) != 0) {
        last = Status::Unavailable("connect to " + address + ": " + last.message());
      }
    } else {
      last = Status::Unavailable("connect to " + address + ": " + strerror(errno));
    }
    close(fd);
    if (last.code() == StatusCode::kCancelled) break;
  }
  freeaddrinfo(res);
  return last;
}

}  // namespace orrery::objects::transfer
