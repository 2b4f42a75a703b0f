#include "core/src/direct_channel.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/internal/protocol_wire.h"
#include "core/internal/security.h"

namespace orrery::transport::direct {

namespace {
constexpr size_t kHeaderBytes = 5;
// Connections accepted per Serve: a storm of them does not hold the loop up.
constexpr int kAcceptsPerServe = 64;
constexpr char kAdmitted = 'A';

bool AddressOf(const std::string& path, sockaddr_un* addr) {
  if (path.empty() || path.size() >= sizeof(addr->sun_path)) return false;
  *addr = sockaddr_un{};
  addr->sun_family = AF_UNIX;
  std::memcpy(addr->sun_path, path.c_str(), path.size() + 1);
  return true;
}

// Writes one message, [header][frame0][payload], without waiting: 1 sent, 0 not now (the
// connection is full, or the message larger than it takes), -1 the connection is broken.
int WriteMessage(int fd, std::string_view frame0, const std::string* payload) {
  const size_t len = frame0.size(), total = len + (payload ? payload->size() : 0);
  unsigned char header[kHeaderBytes] = {
      static_cast<unsigned char>(len), static_cast<unsigned char>(len >> 8),
      static_cast<unsigned char>(len >> 16), static_cast<unsigned char>(len >> 24),
      static_cast<unsigned char>(payload ? 1 : 0)};
  iovec iov[3] = {
      {header, kHeaderBytes},
      {const_cast<char*>(frame0.data()), len},
      {payload ? const_cast<char*>(payload->data()) : nullptr, payload ? payload->size() : 0}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = payload ? 3 : 2;
  ssize_t n = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n == ssize_t(kHeaderBytes + total)) return 1;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS || errno == EINTR ||
                errno == EMSGSIZE)) {
    return 0;
  }
  return -1;
}

bool PeerIsThisUser(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == geteuid();
}
}  // namespace

bool Enabled() {
  const char* v = std::getenv("ORRERY_DIRECT_CHANNEL");
  return v == nullptr || std::string(v) != "0";
}

std::string Hello() {
  return std::string("orrery direct ") + char('0' + proto::kProtocolVersion) + " " +
         security::LocalSecret(security::ProcessCredentials());
}

// ---------------------------------------------------------------- Listener

Listener::~Listener() {
  for (auto& c : conns_) close(c.fd);
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(path_.c_str());
  }
}

bool Listener::Listen(const std::string& path, std::string* why) {
  sockaddr_un addr;
  if (!AddressOf(path, &addr)) {
    *why = "the path " + path + " is too long for a Unix socket";
    return false;
  }
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  unlink(path.c_str());  // left by a process that had this port before (its inbox file too)
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 4096) != 0) {
    *why = "cannot listen on " + path + ": " + std::strerror(errno);
    close(fd);
    return false;
  }
  listen_fd_ = fd;
  path_ = path;
  if (rlimit rl{}; getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    max_connections_ = std::min<size_t>(kMaxConnections, size_t(rl.rlim_cur) / 8);
  Refresh();
  return true;
}

void Listener::Refresh() {
  fds_.clear();
  fds_.push_back(listen_fd_);
  for (auto& c : conns_) fds_.push_back(c.fd);
  ++generation_;
}

void Listener::Accept() {
  for (int n = 0; n < kAcceptsPerServe; ++n) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (conns_.size() >= max_connections_ || !PeerIsThisUser(fd)) {
      close(fd);  // only its hello can have been sent: the sender uses ZeroMQ
      continue;
    }
    conns_.push_back(Connection{fd, false});
  }
}

bool Listener::Admit(const Message& hello) const {
  return !hello.has_payload && security::SecretEquals(std::string(hello.frame0), Hello());
}

int Listener::ReadOne(Connection& c, Message* m) {
  constexpr size_t kBufferBytes = kHeaderBytes + kMaxMessageBytes + 1;
  if (!buffer_) buffer_.reset(new char[kBufferBytes]);
  iovec iov{buffer_.get(), kBufferBytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  ssize_t n = recvmsg(c.fd, &msg, MSG_DONTWAIT);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
  // 0 bytes: the peer hung up (a sender never sends an empty message). Truncated: larger
  // than any sender sends.
  if (n == 0 || (msg.msg_flags & MSG_TRUNC) != 0 || size_t(n) < kHeaderBytes) return -1;
  const auto* b = reinterpret_cast<const unsigned char*>(buffer_.get());
  size_t len = size_t(b[0]) | size_t(b[1]) << 8 | size_t(b[2]) << 16 | size_t(b[3]) << 24;
  unsigned char flag = b[4];
  if (flag > 1 || len > size_t(n) - kHeaderBytes || (flag == 0 && len != size_t(n) - kHeaderBytes))
    return -1;
  m->frame0 = std::string_view(buffer_.get() + kHeaderBytes, len);
  m->has_payload = flag == 1;
  m->payload = std::string_view(buffer_.get() + kHeaderBytes + len, size_t(n) - kHeaderBytes - len);
  if (c.admitted) return 1;
  // The first message is the hello: answered, or the connection is closed.
  if (!Admit(*m) || send(c.fd, &kAdmitted, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1) return -1;
  c.admitted = true;
  return 2;
}

void Listener::CloseAt(size_t i) {
  close(conns_[i].fd);
  conns_.erase(conns_.begin() + long(i));
}

size_t Listener::Serve(const std::vector<bool>& readable, size_t budget,
                       const std::function<bool(Message&)>& handle, bool* more) {
  size_t read = 0;
  std::vector<size_t> ended;
  Message m;
  const size_t known = std::min(conns_.size(), readable.size() > 0 ? readable.size() - 1 : 0);
  for (size_t i = 0; i < known; ++i) {
    if (!readable[i + 1]) continue;
    while (true) {
      if (read >= budget) {
        *more = true;
        break;
      }
      int got = ReadOne(conns_[i], &m);
      if (got < 0) {
        ended.push_back(i);
        break;
      }
      if (got == 0) break;
      if (got == 2) continue;  // the hello: more may have come behind it
      ++read;
      if (!handle(m)) return read;  // the loop is another thread's now
    }
  }
  for (auto it = ended.rbegin(); it != ended.rend(); ++it) CloseAt(*it);
  if (!readable.empty() && readable[0]) Accept();
  if (!ended.empty() || (!readable.empty() && readable[0])) Refresh();
  return read;
}

// ---------------------------------------------------------------- Sender

Sender::Sender(const std::string& path) {
  sockaddr_un addr;
  if (!Enabled() || !AddressOf(path, &addr)) return;
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  // A listener whose backlog is full refuses at once (EAGAIN): ZeroMQ then.
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || !PeerIsThisUser(fd) ||
      WriteMessage(fd, Hello(), nullptr) != 1) {
    close(fd);
    return;
  }
  fd_ = fd;
}

Sender::~Sender() {
  if (fd_ >= 0) close(fd_);
}

bool Sender::Ready() {
  if (admitted_ || fd_ < 0) return admitted_;
  char answer = 0;
  ssize_t n = recv(fd_, &answer, 1, MSG_DONTWAIT);
  if (n == 1 && answer == kAdmitted) {
    admitted_ = true;
  } else if (n == 0 || n == 1 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    close(fd_);  // refused
    fd_ = -1;
  }
  return admitted_;
}

Sender::Outcome Sender::Send(std::string_view frame0, const std::string* payload) {
  if (!Ready()) return fd_ < 0 ? Outcome::kBroken : Outcome::kNotNow;
  size_t total = frame0.size() + (payload ? payload->size() : 0);
  if (total > kMaxMessageBytes) return Outcome::kNotNow;
  int written = WriteMessage(fd_, frame0, payload);
  if (written == 1) return Outcome::kSent;
  if (written == 0) return Outcome::kNotNow;
  close(fd_);  // the peer hung up
  fd_ = -1;
  admitted_ = false;
  return Outcome::kBroken;
}

}  // namespace orrery::transport::direct
