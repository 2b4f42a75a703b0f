// A TCP port held for a server that starts later, in another library: c10d's TCPStore,
// which rank 0's loop starts at MASTER_PORT (orrery/train/torch.h).
//
// Why hold it rather than probe and close: a port found free and closed again is free for
// anyone until the store binds it (another worker's ZeroMQ socket, an outgoing
// connection's source port), and then the rendezvous fails. The reservation keeps a socket
// bound, not listening, to the wildcard address with SO_REUSEADDR: the kernel picks no
// ephemeral port that is bound, and a bind without SO_REUSEADDR fails, while a server that
// sets SO_REUSEADDR (TCPStore does) may still bind and listen on it, since Linux refuses
// such a bind only next to a listening socket. Publishing the port of a store started on
// port 0 instead would need the store before the trainer hands out MASTER_PORT, but the
// store lives in the user's loop, which starts after it.
#pragma once

#include <string>

#include "orrery/status.h"

namespace orrery::train::internal {

class PortReservation {
 public:
  PortReservation() = default;
  ~PortReservation() { Release(); }
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;

  // Binds a port the kernel picks, on every local address (IPv6 and IPv4 where the host
  // has IPv6, else IPv4). Releases what was held before. Unavailable when no socket binds.
  Status Reserve();
  // The port held, 0 when none.
  int port() const { return port_; }
  // Closes the socket: the port is anyone's again.
  void Release();

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace orrery::train::internal
