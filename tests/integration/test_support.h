// Shared helpers for the integration tests: the cluster every test binary runs against,
// waiting on conditions with deadlines (never sleep-and-hope), and cleanup of actors.
//
// Integration binaries re-run themselves as worker processes, so every binary links
// test_main.cc, whose main() calls orrery::RunWorkerIfRequested first.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "orrery/orrery.h"

namespace orrery_test {

// Upper bound for a Get that should succeed: a hang becomes a GetTimeoutError (a test
// failure with a message) instead of a ctest TIMEOUT.
inline constexpr int kGetTimeoutMs = 60000;
inline constexpr std::chrono::seconds kDeadline{30};

// The embedded cluster of the integration tests. CPUs are set explicitly (more than the
// test machine may have) so scheduling does not depend on the host; "Custom" and the label
// let tests check that Config reaches the node; infeasible demands fail fast.
inline constexpr double kTestCpus = 16;
inline constexpr double kTestCustom = 2;
inline const char* const kTestLabelKey = "orrery.io/test";
inline const char* const kTestLabelValue = "integration";
// Not the default (0.95), so tests see that Config reaches the node's memory monitor.
inline constexpr double kTestMemoryUsageThreshold = 0.99;

inline orrery::Config TestClusterConfig() {
  orrery::Config config;
  config.num_cpus = int(kTestCpus);
  config.resources = {{"Custom", kTestCustom}};
  config.labels = {{kTestLabelKey, kTestLabelValue}};
  // Quiet unless ORRERY_LOG_LEVEL asks for more (fields set here would override it).
  if (std::getenv("ORRERY_LOG_LEVEL") == nullptr) config.log_level = "warn";
  config.infeasible_timeout_s = 0.5;
  config.memory_usage_threshold = kTestMemoryUsageThreshold;
  return config;
}

// Init once per test binary, Shutdown at the end.
class ClusterEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    try {
      orrery::Init(TestClusterConfig());
    } catch (const std::exception& e) {
      GTEST_FAIL() << "orrery::Init failed: " << e.what();
    }
    ASSERT_TRUE(orrery::IsInitialized());
  }
  void TearDown() override {
    if (orrery::IsInitialized()) orrery::Shutdown();
  }
};

// Polls `condition` every few milliseconds until it holds or `timeout` passes. Returns
// whether it held. This is a wait on a condition, not a settling sleep.
inline bool WaitFor(const std::function<bool()>& condition,
                    std::chrono::milliseconds timeout = kDeadline) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A process is gone when no process has its pid, or it has exited and awaits reaping.
inline bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) == -1 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

// Marker files, which a worker and the test use to signal each other across processes.
inline bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }
inline void Touch(const std::string& path) { std::ofstream(path) << "x"; }
// Waits (up to a minute) for `path` to exist: inside a worker, where a test's gate opens.
inline void AwaitMarker(const std::string& path) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!Exists(path) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

// A path for a marker file that does not exist yet; removed when the guard goes.
class TempMarker {
 public:
  TempMarker() {
    static int counter = 0;
    path_ = "/tmp/orrery_test_marker_" + std::to_string(getpid()) + "_" +
            std::to_string(++counter) + "_" + orrery::UniqueId::Random().Hex().substr(0, 8);
    std::remove(path_.c_str());
  }
  ~TempMarker() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline double ResourceOr0(const orrery::Resources& r, const std::string& name) {
  auto it = r.find(name);
  return it == r.end() ? 0.0 : it->second;
}

// The CPUs the cluster has free now.
inline double AvailableCpu() { return ResourceOr0(orrery::AvailableResources(), "CPU"); }

// Kills the actors a test created when the test ends, pass or fail, so one failing test
// does not hold resources that later tests need.
class ActorReaper {
 public:
  ActorReaper() = default;
  ActorReaper(const ActorReaper&) = delete;
  ActorReaper& operator=(const ActorReaper&) = delete;
  ~ActorReaper() {
    for (const auto& id : actors_) {
      try {
        orrery::internal::KillActor(id, /*no_restart=*/true);
      } catch (...) {
        // Already dead or never created: nothing to clean up.
      }
    }
  }
  template <typename T>
  orrery::ActorHandle<T> Add(orrery::ActorHandle<T> handle) {
    actors_.push_back(handle.ID());
    return handle;
  }

 private:
  std::vector<orrery::ActorId> actors_;
};

}  // namespace orrery_test
