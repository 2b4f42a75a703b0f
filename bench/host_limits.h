// The host's own limits, measured in the same run as the metrics so that every ratio is read
// against this machine (docs/benchmarks.md "Limits"):
//
//   tcp_roundtrip_limit    a plain TCP ping-pong of 2 bytes between two processes over
//                          loopback (TCP_NODELAY, blocking read and write): the kernel's cost
//   ipc_roundtrip_limit    the ZeroMQ DEALER->ROUTER round trip of zmq_roundtrip_limit over
//                          ipc:// (a Unix domain socket) instead of TCP
//   shm_roundtrip_limit    a ping-pong through a shared page between two processes, each side
//                          sleeping in futex() until the other wakes it (no spinning)
//   process_spawn_limit    fork() of a process of a zygote's size whose child writes to as much
//                          as a worker writes (copy-on-write pages of the parent and fresh
//                          ones), then _exit(); the parent waits for it
//
// Each runs before Orrery starts: the children are forked from a process without Orrery's
// threads and only make system calls.
#pragma once

#include <cstddef>

#include "timeit.h"

namespace orrery::bench {

// The sizes process_spawn_limit forks and touches, in KiB: those of a worker here. A zygote
// was 12.6 MB resident, and a worker that had served calls held 2.3 MB Private_Dirty
// (/proc/<pid>/smaps_rollup): pages it copied from the zygote on write and pages it mapped
// fresh (stacks, heap), about half each.
struct SpawnShape {
  size_t resident_kb = 12 << 10;  // the parent's touched heap
  size_t cow_kb = 1152;           // of which the child writes this much (copy-on-write faults)
  size_t fresh_kb = 1152;         // and this much of freshly mapped memory
};

Rate MeasureTcpRoundTrip(const TimingOptions& options);
Rate MeasureShmRoundTrip(const TimingOptions& options);
Rate MeasureProcessSpawn(const TimingOptions& options, const SpawnShape& shape);

}  // namespace orrery::bench
