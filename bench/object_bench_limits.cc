#include "bench/object_bench_limits.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

namespace orrery::bench {

void FreshCopy(const void* src, size_t n) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error(std::string("fresh copy: ") + std::strerror(errno));
  (void)madvise(p, n, MADV_HUGEPAGE);  // a kernel without THP keeps small pages
  std::memcpy(p, src, n);
  // Read back through a volatile pointer so the copy cannot be left out.
  if (n != 0 && static_cast<volatile char*>(p)[n / 2] != static_cast<const char*>(src)[n / 2])
    std::abort();
  munmap(p, n);
}

double RawTcpSeconds(const std::vector<char>& src, std::vector<char>& dst) {
  const size_t bytes = std::min(src.size(), dst.size());
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(listener);
    throw std::runtime_error(std::string("raw TCP limit: ") + std::strerror(errno));
  }
  std::thread sender([&] {
    int fd = accept(listener, nullptr, nullptr);
    size_t sent = 0;
    while (fd >= 0 && sent < bytes) {
      ssize_t n = send(fd, src.data() + sent, bytes - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += size_t(n);
    }
    if (fd >= 0) close(fd);
  });
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  auto start = std::chrono::steady_clock::now();
  size_t got = 0;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    while (got < bytes) {
      ssize_t n = recv(fd, dst.data() + got, bytes - got, 0);
      if (n <= 0) break;
      got += size_t(n);
    }
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  close(fd);
  sender.join();
  close(listener);
  if (got != bytes) throw std::runtime_error("raw TCP limit: the stream ended early");
  return s;
}

double RawTcpGbps(size_t bytes, int iterations) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  RawTcpSeconds(src, dst);  // warm-up
  std::vector<double> s;
  for (int i = 0; i < std::max(1, iterations); ++i) s.push_back(RawTcpSeconds(src, dst));
  std::sort(s.begin(), s.end());
  return double(bytes) / s[s.size() / 2] / 1e9;
}

void UnpackRefsLimit(const std::vector<ObjectRef<int>>& refs) {
  static const std::string bytes = internal::Pack(refs);
  auto oh = internal::UnpackUntrusted(bytes.data(), bytes.size(), internal::kValueUnpackLimits);
  auto pairs = oh.get().as<std::vector<std::vector<std::string>>>();
  if (pairs.size() != refs.size()) throw std::runtime_error("10k refs: unpacked a wrong count");
}

}  // namespace orrery::bench
