#include "tests/chaos/chaos_monkey.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "tests/fakes/cpu_burner.h"

namespace orrery_chaos {

const char* TargetName(Target t) {
  switch (t) {
    case Target::kWorker:
      return "worker";
    case Target::kNode:
      return "node";
    case Target::kRedis:
      return "redis";
    case Target::kHead:
      return "head";
    case Target::kPauseNode:
      return "pause";
    case Target::kPauseDriver:
      return "driver";
    case Target::kOverload:
      return "burn";
  }
  return "?";
}

std::vector<ChaosEvent> MakePlan(uint64_t seed, double duration_s, double first_s,
                                 double max_pause_s) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> gap(3, 8), node_down(0.5, 3), redis_down(0.5, 8),
      head_down(0, 2), pause(0.2, std::max(0.2, max_pause_s)), burn(2, 6);
  std::vector<ChaosEvent> plan;
  std::vector<Target> round;
  double t = first_s;
  while (t < duration_s - 5) {
    if (round.empty()) {
      round = {Target::kWorker, Target::kWorker,    Target::kNode,        Target::kRedis,
               Target::kHead,   Target::kPauseNode, Target::kPauseDriver, Target::kOverload};
      std::shuffle(round.begin(), round.end(), rng);
    }
    ChaosEvent e;
    e.at_s = t;
    e.target = round.back();
    round.pop_back();
    e.pick = uint32_t(rng());
    if (e.target == Target::kNode) e.downtime_s = node_down(rng);
    if (e.target == Target::kRedis) e.downtime_s = redis_down(rng);
    if (e.target == Target::kHead) e.downtime_s = head_down(rng);
    if (e.target == Target::kPauseNode || e.target == Target::kPauseDriver)
      e.downtime_s = pause(rng);
    if (e.target == Target::kOverload) e.downtime_s = burn(rng);
    plan.push_back(e);
    t += gap(rng);
  }
  return plan;
}

std::string Describe(const ChaosEvent& e) {
  char buf[160];
  const char* verb = e.target == Target::kPauseNode || e.target == Target::kPauseDriver ? "stop"
                     : e.target == Target::kOverload                                    ? "load"
                                                                                        : "kill";
  std::snprintf(buf, sizeof(buf), "t=%6.1fs %s %-6s pick=%10u down %.1fs", e.at_s, verb,
                TargetName(e.target), e.pick, e.downtime_s);
  return buf;
}

ChaosMonkey::ChaosMonkey(orrery_cluster::Cluster* cluster, std::vector<ChaosEvent> plan,
                         std::string marker, double health_period_s, int health_threshold)
    : cluster_(cluster),
      plan_(std::move(plan)),
      marker_(std::move(marker)),
      health_period_s_(health_period_s),
      health_threshold_(health_threshold) {}

ChaosMonkey::~ChaosMonkey() { Stop(); }

void ChaosMonkey::Start() {
  start_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] { Run(); });
}

void ChaosMonkey::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

bool ChaosMonkey::Pause(double s) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(s);
  while (std::chrono::steady_clock::now() < until) {
    if (stop_) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return !stop_;
}

void ChaosMonkey::Run() {
  for (const auto& e : plan_) {
    double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (!Pause(e.at_s - now)) return;
    // No exception may leave this thread: a daemon that cannot be restarted ends the chaos.
    try {
      Apply(e);
    } catch (const std::exception& ex) {
      std::lock_guard<std::mutex> lock(mu_);
      failures_.push_back(Describe(e) + ": " + ex.what());
      return;
    }
    ++done_;
  }
}

void ChaosMonkey::Note(const std::string& line) {
  double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char buf[32];
  std::snprintf(buf, sizeof(buf), "[chaos %6.1fs] ", now);
  std::printf("%s%s\n", buf, line.c_str());
  std::fflush(stdout);
  std::lock_guard<std::mutex> lock(mu_);
  log_.push_back(buf + line);
}

void ChaosMonkey::Apply(const ChaosEvent& e) {
  // Downtimes are waited out in full even when Stop() comes, so that what was killed is
  // always restarted.
  auto down = [&](double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); };
  switch (e.target) {
    case Target::kWorker: {
      std::vector<int> workers;
      for (const auto& p : MarkedProcesses(marker_))
        if (p.role == Role::kWorker) workers.push_back(p.pid);
      if (workers.empty()) {
        Note(Describe(e) + ": no worker process to kill");
        return;
      }
      std::sort(workers.begin(), workers.end());
      int pid = workers[e.pick % workers.size()];
      kill(pid, SIGKILL);
      Note(Describe(e) + ": killed worker " + std::to_string(pid) + " (of " +
           std::to_string(workers.size()) + ")");
      return;
    }
    case Target::kNode: {
      size_t index;
      int pid;
      {
        std::lock_guard<std::mutex> lock(mu_);
        index = e.pick % cluster_->node_pids().size();
        pid = cluster_->node_pids()[index];
        cluster_->KillNode(index);
        killed_.push_back(pid);
      }
      Note(Describe(e) + ": killed node " + std::to_string(index) + " (pid " + std::to_string(pid) +
           ")");
      down(e.downtime_s);
      int fresh;
      {
        std::lock_guard<std::mutex> lock(mu_);
        fresh = cluster_->RestartNode(index);
      }
      Note("node " + std::to_string(index) + " restarted as pid " + std::to_string(fresh));
      return;
    }
    case Target::kRedis: {
      int pid;
      {
        std::lock_guard<std::mutex> lock(mu_);
        pid = cluster_->redis_pid();
        cluster_->KillRedis();
        killed_.push_back(pid);
      }
      Note(Describe(e) + ": killed redis-server (pid " + std::to_string(pid) + ")");
      down(e.downtime_s);
      {
        std::lock_guard<std::mutex> lock(mu_);
        cluster_->RestartRedis();
      }
      Note("redis-server restarted as pid " + std::to_string(Current().redis));
      return;
    }
    case Target::kPauseNode: {
      int pid;
      {
        std::lock_guard<std::mutex> lock(mu_);
        pid = cluster_->node_pids()[e.pick % cluster_->node_pids().size()];
      }
      if (pid <= 0) return Note(Describe(e) + ": no node to pause");
      kill(pid, SIGSTOP);
      Note(Describe(e) + ": paused node pid " + std::to_string(pid));
      down(e.downtime_s);
      kill(pid, SIGCONT);
      return Note("node pid " + std::to_string(pid) + " resumed");
    }
    case Target::kPauseDriver:
      return PauseDriver(e);
    case Target::kOverload:
      return Overload(e);
    case Target::kHead: {
      int pid;
      {
        std::lock_guard<std::mutex> lock(mu_);
        pid = cluster_->head_pid();
        cluster_->KillHead();
        killed_.push_back(pid);
      }
      Note(Describe(e) + ": killed the head (pid " + std::to_string(pid) + ")");
      down(e.downtime_s);
      {
        std::lock_guard<std::mutex> lock(mu_);
        cluster_->StartHead(health_period_s_, health_threshold_);
      }
      Note("head restarted as pid " + std::to_string(Current().head));
      return;
    }
  }
}

void ChaosMonkey::Overload(const ChaosEvent& e) {
  orrery::testing::CpuBurner burner;
  Note(Describe(e) + ": " + std::to_string(burner.size()) + " CPU burner(s)");
  std::this_thread::sleep_for(std::chrono::duration<double>(e.downtime_s));
  Note("the CPU burners stopped");
}

void ChaosMonkey::PauseDriver(const ChaosEvent& e) {
  Note(Describe(e) + ": pausing this driver (pid " + std::to_string(getpid()) + ")");
  timespec nap{time_t(e.downtime_s), long((e.downtime_s - double(time_t(e.downtime_s))) * 1e9)};
  pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls in the child of a threaded process.
    pid_t driver = getppid();
    kill(driver, SIGSTOP);
    nanosleep(&nap, nullptr);
    kill(driver, SIGCONT);
    _exit(0);
  }
  if (pid < 0) return Note("fork failed: the driver was not paused");
  waitpid(pid, nullptr, 0);
  Note("this driver resumed");
}

std::vector<std::string> ChaosMonkey::Log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

std::vector<std::string> ChaosMonkey::Failures() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failures_;
}

ChaosMonkey::Daemons ChaosMonkey::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Daemons{cluster_->redis_pid(), cluster_->head_pid(), cluster_->node_pids()};
}

std::vector<int> ChaosMonkey::Killed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return killed_;
}

}  // namespace orrery_chaos
