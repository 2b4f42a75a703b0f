// Orrery's microbenchmarks, named and defined as in Ray's ray_perf.py (`ray microbenchmark`).
// Each is one call of Run(): it returns the rate in operations per second.
#pragma once

#include <string>
#include <vector>

#include "timeit.h"

namespace orrery::bench {

struct MetricOptions {
  TimingOptions timing;
  int batch = 1000;         // calls per batch in the *_async and *_concurrent metrics
  int actors = 10;          // actors created per step of actor_creation
  int concurrency = 16;     // max concurrency of the actor in 1_1_actor_calls_concurrent
  int timeout_ms = 120000;  // per Get: a metric that hangs fails instead of hanging the run
};

struct Metric {
  const char* name;
  const char* definition;
  Rate (*run)(const MetricOptions& options);
};

// The Orrery metrics in the order they run (zmq_roundtrip_limit is not among them).
const std::vector<Metric>& Metrics();

// The custom resource the embedded node offers for the benchmark's actors, so that (as
// Ray's num_cpus=0 benchmark actors) they do not compete for CPU slots with tasks.
inline constexpr const char* kActorResource = "orrery_bench_actor";
inline constexpr double kActorResourceCapacity = 100000;

// Actors per burst of actor_creation_burst_32, and the prestarted workers the benchmark's
// embedded node keeps (Config::prestarted_workers) so that a burst finds them all.
inline constexpr int kBurstActors = 32;
// Tasks an async actor fans out and gathers in async_actor_fanout_10000.
inline constexpr int kFanOutTasks = 10000;
// Actors created at once by actor_creation_1000.
inline constexpr int kManyActors = 1000;

}  // namespace orrery::bench
