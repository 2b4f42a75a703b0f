// The limit every Orrery metric is compared with: the rate of synchronous ZeroMQ
// request/reply round trips of a small message between two processes over loopback TCP,
// with plain libzmq (cppzmq) and nothing else on the path.
#pragma once

#include "timeit.h"

namespace orrery::bench {

// The flag that starts this executable as the echo server (see RunZmqEchoServer).
inline constexpr const char* kEchoServerFlag = "--zmq-echo-server";

// Serves a ROUTER socket on tcp://127.0.0.1:<port> (0: an ephemeral port) that sends every
// message back to its sender. Prints "ENDPOINT <endpoint>" on stdout once bound; returns
// (exit status) on a "STOP" message or when the parent process dies.
int RunZmqEchoServer(int port);

// Starts the echo server as a child process (this executable re-run through
// /proc/self/exe), measures DEALER round trips against it, and stops it.
// Throws std::runtime_error when the server cannot be started.
Rate MeasureZmqRoundTrip(const TimingOptions& options);

}  // namespace orrery::bench
