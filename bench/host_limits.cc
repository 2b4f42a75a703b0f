#include "host_limits.h"

#include <arpa/inet.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace orrery::bench {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kKiB = 1024;

[[noreturn]] void Fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

// A forked child that dies with the parent and is killed and reaped when this goes away.
class Child {
 public:
  template <typename F>
  explicit Child(F&& body) {
    pid_ = fork();
    if (pid_ < 0) Fail("fork");
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      body();
      _exit(0);
    }
  }
  ~Child() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

 private:
  pid_t pid_ = -1;
};

bool ReadFully(int fd, char* buf, size_t n) {
  while (n > 0) {
    ssize_t got = read(fd, buf, n);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      return false;
    }
    buf += got;
    n -= size_t(got);
  }
  return true;
}

bool WriteFully(int fd, const char* buf, size_t n) {
  while (n > 0) {
    ssize_t put = write(fd, buf, n);
    if (put <= 0) {
      if (put < 0 && errno == EINTR) continue;
      return false;
    }
    buf += put;
    n -= size_t(put);
  }
  return true;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout = nullptr) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

// Waits until *word != seen, sleeping in futex() (no spinning).
void WaitChange(std::atomic<uint32_t>* word, uint32_t seen) {
  while (word->load(std::memory_order_acquire) == seen) Futex(word, FUTEX_WAIT, seen);
}

void Publish(std::atomic<uint32_t>* word, uint32_t value) {
  word->store(value, std::memory_order_release);
  Futex(word, FUTEX_WAKE, 1);
}

}  // namespace

Rate MeasureTcpRoundTrip(const TimingOptions& options) {
  Fd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.get() < 0) Fail("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) Fail("bind");
  if (listen(listener.get(), 1) != 0) Fail("listen");
  const timeval kAcceptTimeout{10, 0};  // a child that cannot connect fails the limit
  setsockopt(listener.get(), SOL_SOCKET, SO_RCVTIMEO, &kAcceptTimeout, sizeof(kAcceptTimeout));
  if (getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    Fail("getsockname");
  Child echo([&] {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) _exit(1);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char buf[2];
    while (ReadFully(fd, buf, sizeof(buf)) && WriteFully(fd, buf, sizeof(buf))) {
    }
    _exit(0);
  });
  Fd conn(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (conn.get() < 0) Fail("accept");
  int one = 1;
  setsockopt(conn.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return TimeIt(
      [&] {
        char buf[2] = {'o', 'k'};
        if (!WriteFully(conn.get(), buf, sizeof(buf)) || !ReadFully(conn.get(), buf, sizeof(buf)))
          throw std::runtime_error("the TCP echo child went away");
      },
      1, options);
}

Rate MeasureShmRoundTrip(const TimingOptions& options) {
  void* page = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) Fail("mmap");
  // ping: the parent's sequence number; pong: the child's answer to it. 0 in pong: stop.
  auto* ping = new (page) std::atomic<uint32_t>(0);
  auto* pong = new (static_cast<char*>(page) + 64) std::atomic<uint32_t>(0);
  Rate rate;
  {
    Child echo([&] {
      uint32_t seen = 0;
      for (;;) {
        WaitChange(ping, seen);
        seen = ping->load(std::memory_order_acquire);
        Publish(pong, seen);
      }
    });
    uint32_t seq = 0;
    const timespec kSecond{1, 0};
    rate = TimeIt(
        [&] {
          Publish(ping, ++seq);
          for (int waits = 0; pong->load(std::memory_order_acquire) != seq; ++waits) {
            if (waits > 10) throw std::runtime_error("the shared-memory echo child went away");
            Futex(pong, FUTEX_WAIT, pong->load(std::memory_order_relaxed), &kSecond);
          }
        },
        1, options);
  }
  munmap(page, kPage);
  return rate;
}

Rate MeasureProcessSpawn(const TimingOptions& options, const SpawnShape& shape) {
  // The parent's resident memory, touched so that every page is present (and so shared
  // copy-on-write with each child).
  std::vector<char> resident(std::max(shape.resident_kb, shape.cow_kb) * kKiB, 1);
  const size_t cow = shape.cow_kb * kKiB;
  const size_t fresh = shape.fresh_kb * kKiB;
  char* base = resident.data();
  return TimeIt(
      [&] {
        pid_t pid = fork();
        if (pid < 0) Fail("fork");
        if (pid == 0) {
          for (size_t i = 0; i < cow; i += kPage) base[i] = 2;
          if (fresh > 0) {
            void* p =
                mmap(nullptr, fresh, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) _exit(1);
            for (size_t i = 0; i < fresh; i += kPage) static_cast<char*>(p)[i] = 1;
          }
          _exit(0);
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
          throw std::runtime_error("a forked child failed");
      },
      1, options);
}

}  // namespace orrery::bench
