#include "dashboard/src/front.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <utility>

namespace orrery::dashboard {

namespace {

using Clock = std::chrono::steady_clock;

// The numeric address and port of a socket address.
std::pair<std::string, int> Endpoint(const sockaddr_storage& sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
    return {buf, ntohs(in6->sin6_port)};
  }
  const auto* in = reinterpret_cast<const sockaddr_in*>(&sa);
  inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
  return {buf, ntohs(in->sin_port)};
}

// A short reply of the front's own; the connection is closed after it.
std::string Plain(const char* status_line, const char* why) {
  std::string body = std::string(why) + "\n";
  bool busy = std::string_view(status_line).substr(0, 3) == "503";
  return std::string("HTTP/1.1 ") + status_line +
         "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n" +
         (busy ? "Retry-After: 5\r\n" : "") + "Content-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

// The value of header `name` (lowercase) in `head`, or "" when absent.
std::string HeaderValue(std::string_view head, std::string_view name) {
  size_t pos = head.find('\n');
  while (pos != std::string_view::npos && pos + 1 < head.size()) {
    size_t end = head.find('\n', pos + 1);
    std::string_view line = head.substr(
        pos + 1, end == std::string_view::npos ? std::string_view::npos : end - pos - 1);
    size_t colon = line.find(':');
    if (colon == name.size() &&
        std::equal(name.begin(), name.end(), line.begin(),
                   [](char a, char b) { return a == std::tolower((unsigned char)b); })) {
      std::string_view v = line.substr(colon + 1);
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == '\r' || v.back() == ' ' || v.back() == '\t'))
        v.remove_suffix(1);
      return std::string(v);
    }
    pos = end;
  }
  return "";
}

Result<int> Listen(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  std::string h = host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  addrinfo* found = nullptr;
  int rc =
      getaddrinfo(h.empty() ? nullptr : h.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) return Status::Unavailable(gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* a = found; a; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int yes = 1;
    // Not SO_REUSEPORT: two dashboards must not share a port.
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) {
      freeaddrinfo(found);
      return fd;
    }
    why = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(found);
  return Status::Unavailable(why);
}

}  // namespace

struct Front::Conn {
  enum class State { kReading, kHandling, kWriting };
  int fd = -1;
  std::string ip;
  int port = 0;
  std::string local_ip;
  int local_port = 0;
  State state = State::kReading;
  std::string in;
  size_t want = 0;  // bytes of the whole request once its head is in; 0 before
  std::string out;
  size_t sent = 0;
  Clock::time_point deadline;
};

Front::Front(FrontOptions options, Handler handler, Streams streams)
    : options_(std::move(options)), handler_(std::move(handler)), streams_(std::move(streams)) {}

Front::~Front() { Stop(); }

Result<int> Front::Start() {
  if (listen_fd_ >= 0) return Status::InvalidArgument("the front was already started");
  auto fd = Listen(options_.host, options_.port);
  if (!fd.ok()) return fd.status();
  listen_fd_ = fd.value();
  sockaddr_storage sa{};
  socklen_t len = sizeof(sa);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  int port = Endpoint(sa).second;
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  for (int i = 0; i < std::max(1, options_.threads); ++i)
    handlers_.emplace_back([this] { HandlerThread(); });
  loop_ = std::thread([this] { Loop(); });
  return port;
}

void Front::Stop() {
  if (stopping_.exchange(true)) return;
  {
    std::unique_lock<std::mutex> lock(mu_);
    queue_.clear();
    cv_.notify_all();
    cv_.wait(lock, [this] { return running_streams_ == 0; });
  }
  for (auto& t : handlers_) t.join();
  handlers_.clear();
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (loop_.joinable()) loop_.join();
  for (auto& [id, c] : conns_) close(c->fd);
  conns_.clear();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
}

void Front::HandlerThread() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void Front::Complete(uint64_t id, std::string reply) {
  std::lock_guard<std::mutex> lock(mu_);
  done_.push_back({id, std::move(reply)});
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

int Front::PollTimeoutMs() const {
  auto next = Clock::now() + std::chrono::seconds(1);
  if (accept_paused_until_ > Clock::now()) next = accept_paused_until_;
  for (const auto& [id, c] : conns_) {
    if (c->state != Conn::State::kHandling) next = std::min(next, c->deadline);
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
  return int(std::max<int64_t>(ms + 1, 0));
}

void Front::Loop() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (!stopping_) {
    short accept = accept_paused_until_ <= Clock::now() ? POLLIN : 0;
    fds.assign({{listen_fd_, accept, 0}, {wake_fd_, POLLIN, 0}});
    ids.assign({0, 0});
    for (const auto& [id, c] : conns_) {
      if (c->state == Conn::State::kHandling) continue;
      fds.push_back({c->fd, short(c->state == Conn::State::kReading ? POLLIN : POLLOUT), 0});
      ids.push_back(id);
    }
    if (poll(fds.data(), fds.size(), PollTimeoutMs()) < 0 && errno != EINTR) break;
    if (stopping_) break;
    if (fds[1].revents) {
      uint64_t n;
      (void)!read(wake_fd_, &n, sizeof(n));
      TakeDone();
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto it = conns_.find(ids[i]);
      if (it == conns_.end()) continue;
      if (it->second->state == Conn::State::kReading) {
        Read(ids[i], *it->second);
      } else if (it->second->state == Conn::State::kWriting) {
        Write(ids[i], *it->second);
      }
    }
    if (fds[0].revents) AcceptAll();
    Expire();
  }
}

void Front::AcceptAll() {
  for (;;) {
    sockaddr_storage sa{};
    socklen_t len = sizeof(sa);
    int fd =
        accept4(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors (or memory) the listening socket stays readable: wait a little
      // rather than spin until a connection closes.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        accept_paused_until_ = Clock::now() + std::chrono::milliseconds(100);
      return;
    }
    auto [ip, port] = Endpoint(sa);
    if (int(conns_.size()) >= options_.max_connections) {
      Refuse(fd, "503 Service Unavailable", "too many connections to the dashboard");
      continue;
    }
    if (per_address_[ip] >= options_.max_connections_per_address) {
      Refuse(fd, "503 Service Unavailable", "too many connections from this address");
      continue;
    }
    ++per_address_[ip];
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->ip = ip;
    c->port = port;
    sockaddr_storage local{};
    len = sizeof(local);
    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
    std::tie(c->local_ip, c->local_port) = Endpoint(local);
    c->deadline = Clock::now() + options_.header_timeout;
    conns_[next_id_++] = std::move(c);
  }
}

void Front::Refuse(int fd, const char* status_line, const char* why) {
  std::string reply = Plain(status_line, why);
  // What the client already sent is read first: closing on unread bytes would reset the
  // connection and could drop the reply.
  char sink[16 * 1024];
  (void)!recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
  // Best effort: a refused connection gets no more of the front's time.
  (void)!send(fd, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  shutdown(fd, SHUT_WR);
  close(fd);
}

void Front::Read(uint64_t id, Conn& c) {
  char buf[16 * 1024];
  for (;;) {
    ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
    if (n > 0) {
      c.in.append(buf, size_t(n));
      if (c.in.size() > options_.max_head_bytes + options_.max_body_bytes) break;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    // The client closed (a whole request may still have arrived before) or the connection
    // failed.
    if (n == 0 && RequestComplete(c) && c.state == Conn::State::kReading) return Dispatch(id, c);
    return Close(id);
  }
  if (RequestComplete(c) && c.state == Conn::State::kReading) Dispatch(id, c);
}

// Whether `c.in` holds a whole request; answers (and leaves kReading) a request the front
// refuses itself.
bool Front::RequestComplete(Conn& c) {
  if (c.want == 0) {
    size_t crlf = c.in.find("\r\n\r\n");
    size_t lf = c.in.find("\n\n");
    size_t end = std::min(crlf == std::string::npos ? crlf : crlf + 4,
                          lf == std::string::npos ? lf : lf + 2);
    if (end == std::string::npos || end > options_.max_head_bytes) {
      if (c.in.size() > options_.max_head_bytes || end != std::string::npos) {
        Reply(c, Plain("431 Request Header Fields Too Large", "the request's head is too long"));
      }
      return false;
    }
    std::string_view head(c.in.data(), end);
    if (!HeaderValue(head, "transfer-encoding").empty()) {
      Reply(c, Plain("411 Length Required", "give the body's Content-Length"));
      return false;
    }
    std::string length = HeaderValue(head, "content-length");
    size_t body = 0;
    if (!length.empty()) {
      if (length.size() > 9 || length.find_first_not_of("0123456789") != std::string::npos) {
        Reply(c, Plain("400 Bad Request", "bad Content-Length"));
        return false;
      }
      body = std::stoul(length);
    }
    if (body > options_.max_body_bytes) {
      Reply(c, Plain("413 Payload Too Large", "the request's body is too long"));
      return false;
    }
    c.want = end + body;
    c.deadline = Clock::now() + options_.body_timeout;
  }
  return c.in.size() >= c.want;
}

void Front::Dispatch(uint64_t id, Conn& c) {
  c.state = Conn::State::kHandling;
  auto ex = std::make_shared<Exchange>();
  ex->request = std::move(c.in);
  c.in.clear();
  ex->remote_ip = c.ip;
  ex->remote_port = c.port;
  ex->local_ip = c.local_ip;
  ex->local_port = c.local_port;
  ex->fd = c.fd;
  ex->write_timeout = options_.write_timeout;
  auto task = [this, id, ex] { Complete(id, handler_(*ex)); };
  size_t line = ex->request.find('\n');
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;  // Stop no longer waits for new threads
  if (streams_ && streams_(std::string_view(ex->request).substr(0, line))) {
    ++running_streams_;
    std::thread([this, task] {
      task();
      std::lock_guard<std::mutex> lock(mu_);
      --running_streams_;
      cv_.notify_all();
    }).detach();
    return;
  }
  queue_.push_back(std::move(task));
  cv_.notify_one();
}

void Front::TakeDone() {
  std::vector<Done> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done.swap(done_);
  }
  for (auto& d : done) {
    auto it = conns_.find(d.id);
    if (it != conns_.end()) Reply(*it->second, std::move(d.reply));
  }
}

void Front::Reply(Conn& c, std::string bytes) {
  c.state = Conn::State::kWriting;
  c.out = std::move(bytes);
  c.sent = 0;
  c.in.clear();
  c.deadline = Clock::now() + options_.write_timeout;
}

void Front::Write(uint64_t id, Conn& c) {
  while (c.sent < c.out.size()) {
    ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.sent += size_t(n);
      // A reply may be large (a big cluster's tables) and the client far: it has
      // write_timeout for each part the kernel takes, not for the whole. A slow reader
      // holds a connection (bounded per address) but no thread.
      c.deadline = Clock::now() + options_.write_timeout;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  Close(id);
}

void Front::Expire() {
  auto now = Clock::now();
  std::vector<uint64_t> late;
  for (auto& [id, c] : conns_) {
    if (c->state != Conn::State::kHandling && c->deadline <= now) late.push_back(id);
  }
  for (uint64_t id : late) {
    Conn& c = *conns_[id];
    if (c.state == Conn::State::kReading) {
      // Too slow to send its request: told so, best effort, and closed.
      Refuse(c.fd, "408 Request Timeout", "the request did not arrive in time");
      c.fd = -1;
    }
    Close(id);
  }
}

void Front::Close(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if (c.fd >= 0) {
    shutdown(c.fd, SHUT_WR);
    close(c.fd);
  }
  auto a = per_address_.find(c.ip);
  if (a != per_address_.end() && --a->second <= 0) per_address_.erase(a);
  conns_.erase(it);
}

}  // namespace orrery::dashboard
