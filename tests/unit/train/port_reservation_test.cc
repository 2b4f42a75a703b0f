// MASTER_PORT's reservation (train/src/port_reservation.h): while a worker holds it, no
// other socket takes the port by accident, yet c10d's TCPStore (which binds with
// SO_REUSEADDR) can still listen on it.
#include "train/src/port_reservation.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace orrery::train::internal {
namespace {

// A socket bound to `ip`:`port`, listening when `listen_too`; -1 with errno when a step
// fails. `reuse_addr` is what TCPStore sets; most servers do not.
int BindTo(const char* ip, int port, bool reuse_addr, bool listen_too) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  if (reuse_addr) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  inet_pton(AF_INET, ip, &addr.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      (listen_too && listen(fd, 8) != 0)) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

TEST(PortReservationTest, NoOtherSocketBindsTheReservedPort) {
  PortReservation r;
  ASSERT_TRUE(r.Reserve().ok());
  ASSERT_GT(r.port(), 0);
  for (const char* ip : {"127.0.0.1", "0.0.0.0"}) {
    int fd = BindTo(ip, r.port(), /*reuse_addr=*/false, /*listen_too=*/true);
    EXPECT_LT(fd, 0) << "another socket took " << ip << ":" << r.port() << " while reserved";
    EXPECT_EQ(errno, EADDRINUSE);
    if (fd >= 0) close(fd);
  }
}

TEST(PortReservationTest, TheStoreCanStillListenOnItAndBeReached) {
  PortReservation r;
  ASSERT_TRUE(r.Reserve().ok());
  // What TCPStore's server does: SO_REUSEADDR, bind on every address, listen.
  int server = BindTo("0.0.0.0", r.port(), /*reuse_addr=*/true, /*listen_too=*/true);
  ASSERT_GE(server, 0) << "the store cannot listen on the reserved port: " << strerror(errno);
  int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(r.port()));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
      << strerror(errno);
  close(client);
  close(server);
}

// TCPStore tries IPv6 first: a dual-stack socket on [::], SO_REUSEADDR, listening.
TEST(PortReservationTest, TheStoreCanListenOnItOverIpv6Too) {
  int server = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (server < 0) GTEST_SKIP() << "no IPv6 on this host";
  PortReservation r;
  ASSERT_TRUE(r.Reserve().ok());
  int one = 1, zero = 0;
  setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  setsockopt(server, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_any;
  addr.sin6_port = htons(uint16_t(r.port()));
  EXPECT_EQ(bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
  EXPECT_EQ(listen(server, 8), 0) << strerror(errno);
  close(server);
}

TEST(PortReservationTest, ReleaseGivesThePortBack) {
  PortReservation r;
  ASSERT_TRUE(r.Reserve().ok());
  int port = r.port();
  r.Release();
  EXPECT_EQ(r.port(), 0);
  int fd = BindTo("127.0.0.1", port, /*reuse_addr=*/false, /*listen_too=*/false);
  EXPECT_GE(fd, 0) << strerror(errno);
  if (fd >= 0) close(fd);
}

}  // namespace
}  // namespace orrery::train::internal
