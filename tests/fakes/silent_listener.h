// A TCP port on 127.0.0.1 that listens and never accepts: connects to it succeed (the
// kernel queues them) and no handshake ever finishes. For tests of what a peer that still
// listens but does not answer looks like; Close() makes it a port nothing listens on.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace orrery::testing {

class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd_, 16) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      Close();
      return;
    }
    address_ = "tcp://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  }
  ~SilentListener() { Close(); }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;

  // "tcp://127.0.0.1:<port>"; empty when no socket could listen.
  const std::string& address() const { return address_; }
  // Stops listening: connects to the address are refused from now on.
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  std::string address_;
};

}  // namespace orrery::testing
