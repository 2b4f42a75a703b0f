// The dashboard under slow clients (docs/dashboard.md "Slow clients", dashboard/src/front.h):
// connections that trickle or stall their requests neither hold the dashboard nor stay open
// past the timeouts, and one client address cannot take every connection. A real server on
// an ephemeral loopback port, without Redis (/api/cluster then answers at once); clients
// connect from other loopback addresses (127.0.0.0/8 is all loopback on Linux) so the
// per-address bound applies to each group apart.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "orrery/dashboard.h"

namespace orrery::dashboard {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kGetCluster =
    "GET /api/cluster HTTP/1.1\r\nHost: dashboard\r\nConnection: close\r\n\r\n";

// One client connection from the loopback address `source` to 127.0.0.1:`port`.
class Client {
 public:
  Client(const std::string& source, int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, source.c_str(), &from.sin_addr);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(uint16_t(port));
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    connected_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from)) == 0 &&
                 connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0;
  }
  ~Client() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return connected_; }
  bool Send(const std::string& bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT) ==
           ssize_t(bytes.size());
  }
  // Reads until the server closes the connection (EOF or reset) or `limit` passes.
  struct Got {
    std::string bytes;
    bool closed = false;
  };
  Got ReadUntilClosed(milliseconds limit) {
    Got got;
    auto deadline = Clock::now() + limit;
    for (;;) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return got;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, int(left)) <= 0) continue;
      char buf[4096];
      ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        got.bytes.append(buf, size_t(n));
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        got.closed = true;
        return got;
      }
    }
  }
  // Whether the server has neither answered nor closed the connection yet.
  bool Untouched() {
    char c;
    ssize_t n = recv(fd_, &c, 1, MSG_DONTWAIT | MSG_PEEK);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// Sends one more byte of a never-ending header to each of its clients every 200 ms, on a
// thread of its own, until destroyed.
class Trickler {
 public:
  explicit Trickler(std::vector<Client*> clients)
      : clients_(std::move(clients)), thread_([this] { Run(); }) {}
  ~Trickler() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, milliseconds(200), [this] { return stop_; })) {
      for (Client* c : clients_) c->Send("a");
    }
  }
  std::vector<Client*> clients_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

// `count` clients from 127.0.0.`first`, 127.0.0.`first + 1`, ..., `per_address` from each.
std::vector<std::unique_ptr<Client>> Connect(int count, int first, int per_address, int port) {
  std::vector<std::unique_ptr<Client>> out;
  for (int i = 0; i < count; ++i) {
    out.push_back(
        std::make_unique<Client>("127.0.0." + std::to_string(first + i / per_address), port));
  }
  return out;
}

Client::Got Get(const std::string& source, int port) {
  Client c(source, port);
  EXPECT_TRUE(c.connected());
  EXPECT_TRUE(c.Send(kGetCluster));
  return c.ReadUntilClosed(seconds(5));
}

bool Answered200(const Client::Got& got) {
  return got.closed && got.bytes.rfind("HTTP/1.1 200", 0) == 0 &&
         got.bytes.find("\"redis\"") != std::string::npos;
}

// 16 connections trickle a header byte at a time and 64 sent half a request and stopped:
// a request from elsewhere is still answered at once (before, every handler thread was
// held by a slow connection and it waited 25 s and more), and the slow ones are held, not
// refused (the per-address bound, 32, is above the 8 each address opens here).
TEST(DashboardSlowClients, SlowConnectionsDoNotStarveOthers) {
  Dashboard d({.redis_address = "", .host = "127.0.0.1", .port = 0});
  auto port = d.Start();
  ASSERT_TRUE(port.ok()) << port.status().message();
  auto trickling = Connect(16, 2, 8, port.value());  // 127.0.0.2 and .3
  auto idle = Connect(64, 4, 8, port.value());       // 127.0.0.4 to .11
  std::vector<Client*> slow;
  for (auto& c : trickling) {
    ASSERT_TRUE(c->connected());
    ASSERT_TRUE(c->Send("GET /api/cluster HTTP/1.1\r\nX-Slow: "));
    slow.push_back(c.get());
  }
  for (auto& c : idle) {
    ASSERT_TRUE(c->connected());
    ASSERT_TRUE(c->Send("GET /api/cluster HTTP/1.1\r\nHost: dash"));
  }
  Trickler trickler(slow);

  Client::Got got = Get("127.0.0.1", port.value());  // bounded by 5 s (default timeouts: 10 s)
  EXPECT_TRUE(Answered200(got)) << "closed " << got.closed << ": " << got.bytes;
  for (auto& c : trickling) EXPECT_TRUE(c->Untouched());
  for (auto& c : idle) EXPECT_TRUE(c->Untouched());
}

// A connection that trickles its head, one that trickles its body and one that stalls are
// answered 408 and closed once their time is up (1 s here), trickled bytes
// notwithstanding.
TEST(DashboardSlowClients, ARequestThatDoesNotArriveInTimeIsClosed) {
  Dashboard d({.redis_address = "",
               .host = "127.0.0.1",
               .port = 0,
               .header_timeout_ms = 1000,
               .body_timeout_ms = 1000});
  auto port = d.Start();
  ASSERT_TRUE(port.ok()) << port.status().message();
  Client head("127.0.0.2", port.value());
  Client body("127.0.0.2", port.value());
  Client stalled("127.0.0.2", port.value());
  ASSERT_TRUE(head.Send("GET /api/cluster HTTP/1.1\r\nX-Slow: "));
  ASSERT_TRUE(body.Send("POST /login HTTP/1.1\r\nContent-Length: 1000\r\n\r\ntoken="));
  ASSERT_TRUE(stalled.Send("GET /api/clu"));
  Trickler trickler({&head, &body});

  for (Client* c : {&head, &body, &stalled}) {
    Client::Got got = c->ReadUntilClosed(seconds(10));
    EXPECT_TRUE(got.closed);
    // The 408 itself may be lost to a reset when a trickled byte crosses the close.
    if (!got.bytes.empty()) {
      EXPECT_EQ(got.bytes.rfind("HTTP/1.1 408", 0), 0u) << got.bytes;
    }
  }
  // A prompt client is still served.
  EXPECT_TRUE(Answered200(Get("127.0.0.1", port.value())));
}

// One address holds at most max_connections_per_address connections: beyond that it is
// refused (503 and closed) while other addresses are served, and served again once one of
// its connections is gone.
TEST(DashboardSlowClients, ConnectionsPerAddressAreBounded) {
  Dashboard d(
      {.redis_address = "", .host = "127.0.0.1", .port = 0, .max_connections_per_address = 4});
  auto port = d.Start();
  ASSERT_TRUE(port.ok()) << port.status().message();
  auto held = Connect(4, 3, 4, port.value());  // 127.0.0.3
  for (auto& c : held) ASSERT_TRUE(c->Send("GET /api/clu"));

  // Accepted in order, so the fifth from 127.0.0.3 comes after the four.
  Client::Got refused = Get("127.0.0.3", port.value());
  EXPECT_TRUE(refused.closed);
  EXPECT_EQ(refused.bytes.find("200 OK"), std::string::npos) << refused.bytes;
  if (!refused.bytes.empty()) {
    EXPECT_EQ(refused.bytes.rfind("HTTP/1.1 503", 0), 0u) << refused.bytes;
  }
  EXPECT_TRUE(Answered200(Get("127.0.0.4", port.value())));
  EXPECT_TRUE(Answered200(Get("127.0.0.1", port.value())));
  for (auto& c : held) EXPECT_TRUE(c->Untouched());

  held.pop_back();  // closed: the server frees its place when it sees the end
  auto deadline = Clock::now() + seconds(5);
  bool served = false;
  while (!served && Clock::now() < deadline) served = Answered200(Get("127.0.0.3", port.value()));
  EXPECT_TRUE(served);
}

// Requests in pieces are answered once whole; what the front answers itself (a chunked
// body, a head or a body too long) it answers with its status, and closes.
TEST(DashboardSlowClients, TheFrontPassesWholeRequestsOnAndRefusesTheRest) {
  Dashboard d({.redis_address = "", .host = "127.0.0.1", .port = 0});
  auto port = d.Start();
  ASSERT_TRUE(port.ok()) << port.status().message();
  auto exchange = [&](const std::vector<std::string>& pieces) {
    Client c("127.0.0.1", port.value());
    EXPECT_TRUE(c.connected());
    for (const auto& p : pieces) {
      EXPECT_TRUE(c.Send(p));
      EXPECT_TRUE(c.Untouched() || &p == &pieces.back());  // no answer to part of a request
    }
    return c.ReadUntilClosed(seconds(5));
  };
  EXPECT_TRUE(Answered200(exchange({"GET /api/clu", "ster HTTP/1.1\r\nHost: d", "\r\n\r\n"})));
  // The login form's body (an open dashboard redirects it to the overview).
  auto login = exchange({"POST /login HTTP/1.1\r\nContent-Length: 7\r\n\r\nto", "ken=x"});
  EXPECT_EQ(login.bytes.rfind("HTTP/1.1 303", 0), 0u) << login.bytes;
  auto head = exchange({"HEAD /api/cluster HTTP/1.1\r\n\r\n"});
  EXPECT_EQ(head.bytes.rfind("HTTP/1.1 200", 0), 0u) << head.bytes;
  EXPECT_EQ(head.bytes.find("\"redis\""), std::string::npos) << head.bytes;
  auto chunked =
      exchange({"POST /login HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n7\r\ntoken=x"});
  EXPECT_EQ(chunked.bytes.rfind("HTTP/1.1 411", 0), 0u) << chunked.bytes;
  auto big = exchange({"POST /login HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n"});
  EXPECT_EQ(big.bytes.rfind("HTTP/1.1 413", 0), 0u) << big.bytes;
  auto long_head = exchange({"GET /api/cluster HTTP/1.1\r\nX: " + std::string(20000, 'a')});
  EXPECT_EQ(long_head.bytes.rfind("HTTP/1.1 431", 0), 0u) << long_head.bytes;
}

// An event stream is written as it goes (not held back until the handler returns), and
// ends when the dashboard stops.
TEST(DashboardSlowClients, EventStreamsStreamAndEndOnStop) {
  Dashboard d({.redis_address = "", .host = "127.0.0.1", .port = 0});
  auto port = d.Start();
  ASSERT_TRUE(port.ok()) << port.status().message();
  Client c("127.0.0.1", port.value());
  ASSERT_TRUE(c.Send("GET /api/events HTTP/1.1\r\nHost: dashboard\r\n\r\n"));
  std::string seen;
  auto deadline = Clock::now() + seconds(5);
  while (seen.find("data:") == std::string::npos && Clock::now() < deadline) {
    Client::Got got = c.ReadUntilClosed(milliseconds(100));
    seen += got.bytes;
    if (got.closed) break;
  }
  EXPECT_EQ(seen.rfind("HTTP/1.1 200", 0), 0u) << seen;
  EXPECT_NE(seen.find("text/event-stream"), std::string::npos) << seen;
  EXPECT_NE(seen.find("data:"), std::string::npos) << seen;
  d.Stop();
  EXPECT_TRUE(c.ReadUntilClosed(seconds(5)).closed);
}

}  // namespace
}  // namespace orrery::dashboard
