// The chaos thread: kills parts of a test cluster with SIGKILL on a schedule drawn from a
// seeded generator, and brings back what it killed (a worker is the runtime's to replace;
// a node, Redis and the head are restarted here). It also pauses nodes and this driver
// (SIGSTOP, then SIGCONT, for less than the head's tolerance: a paused node or driver must
// keep its actors) and overloads the machine (a CPU burner per core for a few seconds). The
// schedule depends on the seed only; which pid a "kill a worker" hits depends on the workers alive
// at that moment (the pick'th of them, sorted by pid).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/chaos/processes.h"
#include "tests/cluster/cluster_fixture.h"

namespace orrery_chaos {

enum class Target { kWorker, kNode, kRedis, kHead, kPauseNode, kPauseDriver, kOverload };
const char* TargetName(Target t);

struct ChaosEvent {
  double at_s = 0;  // seconds after the start of the chaos
  Target target = Target::kWorker;
  uint32_t pick = 0;      // which worker or node (modulo the candidates)
  double downtime_s = 0;  // how long a killed daemon stays down, a pause or an overload lasts
};

// Events from about `first_s` until `duration_s - 5`, one every 3 to 8 s; a node stays down
// 0.5 to 3 s, Redis 0.5 to 8 s (at times longer than the head retries a write), the head up
// to 2 s; a node or the driver is paused for 0.2 to `max_pause_s` s, the CPUs overloaded
// for 2 to 6 s. Targets come from shuffled rounds of {worker, worker, node, Redis, head,
// pause a node, pause the driver, overload},
// so every kind is hit even in a short run.
std::vector<ChaosEvent> MakePlan(uint64_t seed, double duration_s, double first_s = 2,
                                 double max_pause_s = 1.5);
std::string Describe(const ChaosEvent& e);

class ChaosMonkey {
 public:
  // `cluster` must outlive the monkey; while it runs, only the monkey changes the cluster,
  // and others read its pids through the accessors below.
  ChaosMonkey(orrery_cluster::Cluster* cluster, std::vector<ChaosEvent> plan, std::string marker,
              double health_period_s, int health_threshold);
  ~ChaosMonkey();

  void Start();
  // Stops after the event in progress (a daemon it killed is running again on return).
  void Stop();

  // What happened, one line per event, and failures to bring a daemon back.
  std::vector<std::string> Log() const;
  std::vector<std::string> Failures() const;
  int events_done() const { return done_; }

  // Snapshot of the daemons' pids (under the monkey's lock).
  struct Daemons {
    int redis = -1, head = -1;
    std::vector<int> nodes;
  };
  Daemons Current() const;
  // Pids of the daemons the monkey killed (they must stay gone, with their children).
  std::vector<int> Killed() const;

 private:
  void Run();
  void Apply(const ChaosEvent& e);
  // A CPU burner per core (children of this process) for e.downtime_s.
  void Overload(const ChaosEvent& e);
  // This whole process (the driver, this thread included) stopped for e.downtime_s by a
  // child that sends SIGSTOP, sleeps and sends SIGCONT.
  void PauseDriver(const ChaosEvent& e);
  void Note(const std::string& line);
  // Sleeps up to `s` seconds; false if Stop() came first.
  bool Pause(double s);

  orrery_cluster::Cluster* cluster_;
  std::vector<ChaosEvent> plan_;
  std::string marker_;
  double health_period_s_;
  int health_threshold_;
  mutable std::mutex mu_;  // guards cluster_'s pids, log_, failures_, killed_
  std::vector<std::string> log_, failures_;
  std::vector<int> killed_;
  std::atomic<bool> stop_{false};
  std::atomic<int> done_{0};
  std::thread thread_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace orrery_chaos
