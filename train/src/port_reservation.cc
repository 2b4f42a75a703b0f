#include "train/src/port_reservation.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace orrery::train::internal {

namespace {

// A socket of `family` bound to the wildcard address and a port the kernel picks, with
// SO_REUSEADDR (see the header); -1 with errno set when it cannot be made.
int BindAny(int family) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1, zero = 0;
  bool ok = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0;
  if (ok && family == AF_INET6) {
    // Dual-stack, so that the port is held for IPv4 as well (TCPStore may bind either).
    ok = setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) == 0;
  }
  if (ok && family == AF_INET6) {
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  } else if (ok) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  if (ok) return fd;
  int saved = errno;
  close(fd);
  errno = saved;
  return -1;
}

int PortOf(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

}  // namespace

Status PortReservation::Reserve() {
  Release();
  int fd = BindAny(AF_INET6);
  if (fd < 0) fd = BindAny(AF_INET);
  if (fd < 0)
    return Status::Unavailable(std::string("cannot reserve a TCP port: ") + std::strerror(errno));
  int port = PortOf(fd);
  if (port == 0) {
    close(fd);
    return Status::Unavailable("cannot read the reserved TCP port");
  }
  fd_ = fd;
  port_ = port;
  return Status::Ok();
}

void PortReservation::Release() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  port_ = 0;
}

}  // namespace orrery::train::internal
