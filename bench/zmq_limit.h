// The limit every Orrery metric is compared with: the rate of synchronous ZeroMQ
// request/reply round trips of a small message between two processes over loopback TCP,
// with plain libzmq (cppzmq) and nothing else on the path.
#pragma once

#include "timeit.h"

namespace orrery::bench {

// The flag that starts this executable as the echo server (see RunZmqEchoServer).
inline constexpr const char* kEchoServerFlag = "--zmq-echo-server";

// The argument of kEchoServerFlag that serves over ipc:// instead of TCP.
inline constexpr const char* kEchoOverIpc = "ipc";

// Serves a ROUTER socket that sends every message back to its sender: on
// tcp://127.0.0.1:<port> (0: an ephemeral port), or with `where` = kEchoOverIpc on a Unix
// socket in $TMPDIR (removed on exit). Prints "ENDPOINT <endpoint>" on stdout once bound;
// returns (exit status) on a "STOP" message or when the parent process dies.
int RunZmqEchoServer(const char* where);

// Starts the echo server as a child process (this executable re-run through
// /proc/self/exe), measures DEALER round trips against it, and stops it. `ipc`: over a Unix
// socket (ipc_roundtrip_limit) instead of loopback TCP (zmq_roundtrip_limit).
// Throws std::runtime_error when the server cannot be started.
Rate MeasureZmqRoundTrip(const TimingOptions& options, bool ipc = false);

}  // namespace orrery::bench
