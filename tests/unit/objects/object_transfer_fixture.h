// What the object transfer tests share: objects held in memory behind an ObjectServer's
// lookup, random bytes, and raw loopback sockets for playing hostile peers.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "objects/internal/object_transfer.h"
#include "objects/internal/object_transfer_wire.h"

namespace orrery::objects::testing {

inline std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937_64 gen(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = gen();
    std::memcpy(&s[i], &v, std::min<size_t>(8, n - i));
  }
  return s;
}

inline TransferKey Key(char fill) { return TransferKey{true, std::string(32, fill)}; }

// Objects an ObjectServer serves; counts lookups so a test can wait for a request to arrive.
class MemoryObjects {
 public:
  ObjectId Add(std::string bytes) {
    ObjectId id = ObjectId::Random();
    std::lock_guard<std::mutex> lock(mu_);
    objects_[id] = std::make_shared<const std::string>(std::move(bytes));
    return id;
  }

  ObjectServer::Lookup Lookup() {
    return [this](const ObjectId& id) -> Result<ObjectBytes> {
      std::lock_guard<std::mutex> lock(mu_);
      ++lookups_;
      cv_.notify_all();
      auto it = objects_.find(id);
      if (it == objects_.end()) return Status::NotFound("no object " + id.Hex());
      return ObjectBytes{it->second->data(), it->second->size(),
                         std::const_pointer_cast<std::string>(it->second)};
    };
  }

  // True when at least n lookups happened within 20 s.
  bool WaitLookups(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return lookups_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<ObjectId, std::shared_ptr<const std::string>> objects_;
  int lookups_ = 0;
};

// Options with a short stall bound (long enough for a loaded machine running sanitizers),
// so a failing peer fails a test quickly.
inline PullOptions TestOptions(uint64_t chunk = 64 << 10, int parallel = 2) {
  PullOptions o;
  o.chunk_bytes = chunk;
  o.parallel = parallel;
  o.stall_timeout_ms = 3000;
  return o;
}

// Pulls `size` bytes of `id` into *out (resized).
inline Status PullInto(const std::string& address, const ObjectId& id, uint64_t size,
                       std::string* out, const PullOptions& options, const TransferKey& key) {
  out->assign(size, '\xee');
  return PullObject(address, id, size, out->data(), options, key);
}

inline double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A raw connection to `address` (a non-blocking socket), -1 on failure.
inline int RawConnect(const std::string& address) {
  Result<int> fd = transfer::Connect(address, 5000, transfer::Bounds{});
  return fd.ok() ? *fd : -1;
}

// Reads and discards what the peer sends until it closes the connection: true when it did
// within timeout_ms.
inline bool WaitClosed(int fd, int timeout_ms) {
  double deadline = Seconds() + timeout_ms / 1000.0;
  char buf[4096];
  while (Seconds() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

// A listening socket on 127.0.0.1 whose first connection is handed to `behaviour` on a thread
// of its own: a server that misbehaves as a test tells it to. The behaviour must end by
// itself (bounded waits); the destructor joins it.
class FakeServer {
 public:
  using Behaviour = std::function<void(int fd)>;
  explicit FakeServer(Behaviour behaviour) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len), 0);
    EXPECT_EQ(listen(listen_fd_, 8), 0);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    address_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    thread_ = std::thread([this, behaviour = std::move(behaviour)] {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 20000) != 1) return;
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      behaviour(fd);
      close(fd);
    });
  }
  ~FakeServer() {
    thread_.join();
    close(listen_fd_);
  }
  const std::string& address() const { return address_; }

 private:
  int listen_fd_ = -1;
  std::string address_;
  std::thread thread_;
};

}  // namespace orrery::objects::testing
