// A worker process: hosts one actor, or runs tasks under leases. Calls arrive on the
// process runtime's inbox; calls from one caller to an actor are started in their
// submission order (by sequence number, whatever socket they came through) and run on the
// Executor. Replies go straight back to the caller's inbox from the executing thread.
#pragma once

namespace orrery::runtime {

// Entry point of a worker process (after the zygote's fork). Never returns.
[[noreturn]] void WorkerMain();

}  // namespace orrery::runtime
