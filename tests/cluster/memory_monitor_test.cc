// The memory monitor on a real node daemon whose host is a fake tree (ORRERY_SYSROOT): the
// test rewrites the fake /proc/meminfo to show usage above memory_usage_threshold while a
// worker is busy, and the node kills a worker (retriable and newest first) so that the
// caller's Get raises OutOfMemoryError naming the node, the usage and the threshold. The
// node's memory shows in Nodes(), in its Redis record and in `orrery status`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "orrery/orrery.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/cluster/redis_client.h"
#include "tests/skip_exit_code.h"

namespace {

using orrery_cluster::WaitFor;
using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t(1) << 30;
constexpr int64_t kMiB = int64_t(1) << 20;

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Blocks until `release` exists (at most 60 s), after appending this process's pid to
// `started`: the test sees that the work runs, and in which process.
void Busy(const std::string& started, const std::string& release) {
  std::ofstream(started, std::ios::app) << getpid() << "\n";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!Exists(release) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

class Hog {
 public:
  static Hog* Create() { return new Hog(); }
  int Work(std::string started, std::string release) {
    Busy(started, release);
    return 1;
  }
};
ORRERY_REMOTE(Hog::Create, &Hog::Work);

int HogTask(std::string started, std::string release) {
  Busy(started, release);
  return 7;
}
ORRERY_REMOTE(HogTask);

std::vector<int> Pids(const std::string& started) {
  std::vector<int> out;
  std::ifstream in(started);
  int pid;
  while (in >> pid) out.push_back(pid);
  return out;
}

bool Gone(int pid) { return kill(pid, 0) != 0; }

class MemoryMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = cluster_.dir() + "/mem_host";
    SetMemory(16 * kGiB, 8 * kGiB);  // 50% in use
    cluster_.StartHead(0.2, 3);
    cluster_.AddNodeWithSysroot(root_, "", 4, {"--memory-usage-threshold", "0.95"});
    orrery::Config c;
    c.address = cluster_.head_address();
    orrery::Init(c);
    ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == 1; }));
    node_ = orrery::Nodes()[0].node_id.Hex();
  }
  void TearDown() override {
    std::ofstream(cluster_.dir() + "/release").close();
    if (orrery::IsInitialized()) orrery::Shutdown();
  }

  // Rewrites the fake host's /proc/meminfo whole (rename: the node never reads half a file).
  void SetMemory(int64_t total, int64_t available) {
    std::filesystem::create_directories(root_ + "/proc");
    std::string tmp = root_ + "/proc/meminfo.tmp";
    std::ofstream(tmp) << "MemTotal:       " << total / 1024 << " kB\n"
                       << "MemFree:        " << available / 1024 << " kB\n"
                       << "MemAvailable:   " << available / 1024 << " kB\n";
    std::filesystem::rename(tmp, root_ + "/proc/meminfo");
  }
  // 16 GiB with 160 MiB available: 99.0% in use, 15.84 GiB.
  void SetMemoryAboveThreshold() { SetMemory(16 * kGiB, 160 * kMiB); }

  std::string Path(const std::string& name) { return cluster_.dir() + "/" + name; }

  orrery_cluster::Cluster cluster_;
  std::string root_;
  std::string node_;
};

TEST_F(MemoryMonitorTest, BusyActorCallRaisesOutOfMemoryErrorNamingNodeUsageAndThreshold) {
  auto hog = orrery::Actor(Hog::Create).Remote();
  auto ref = hog.Task(&Hog::Work).Remote(Path("started"), Path("release"));
  ASSERT_TRUE(WaitFor([&] { return Pids(Path("started")).size() == 1; }))
      << "the call never started";
  SetMemoryAboveThreshold();
  try {
    orrery::Get(ref, 60000);
    FAIL() << "expected OutOfMemoryError";
  } catch (const orrery::OutOfMemoryError& e) {
    std::string m = e.what();
    EXPECT_THAT(m, HasSubstr("node " + node_));
    EXPECT_THAT(m, HasSubstr("15.84 GiB of 16.00 GiB"));
    EXPECT_THAT(m, HasSubstr("99.0%"));
    EXPECT_THAT(m, HasSubstr("threshold 0.95"));
    EXPECT_THAT(m, HasSubstr("pid " + std::to_string(Pids(Path("started"))[0])));
  } catch (const orrery::Error& e) {
    FAIL() << "expected OutOfMemoryError, got " << e.kind() << ": " << e.what();
  }
  EXPECT_TRUE(WaitFor([&] { return Gone(Pids(Path("started"))[0]); }))
      << "the worker was not killed";
  // The actor (no restarts) is dead of it: later calls say why too.
  EXPECT_THROW(orrery::Get(hog.Task(&Hog::Work).Remote(Path("started"), Path("release")), 30000),
               orrery::OutOfMemoryError);
  orrery_cluster::Redis r(cluster_.redis_address());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(WaitFor([&] {
    auto rec =
        nlohmann::json::parse(r.HGet("orrery:default:actors", hog.ID().Hex()), nullptr, false);
    return rec.is_object() && rec.value("death_kind", "") == "OutOfMemoryError";
  })) << r.HGet("orrery:default:actors", hog.ID().Hex());
}

TEST_F(MemoryMonitorTest, NewestRetriableWorkerGoesFirst) {
  // An actor that would be restarted (older) and one that would not (newer): the retriable
  // one is killed first although it is older, and its call (no task retries) fails with
  // OutOfMemoryError. The node kills one worker at a time and waits for it to exit, so
  // when the first death is seen it must be the retriable one's.
  auto retriable = orrery::Actor(Hog::Create).SetMaxRestarts(1).Remote();
  auto first = retriable.Task(&Hog::Work).Remote(Path("a_started"), Path("release"));
  ASSERT_TRUE(WaitFor([&] { return Pids(Path("a_started")).size() == 1; }));
  auto fragile = orrery::Actor(Hog::Create).Remote();
  auto second = fragile.Task(&Hog::Work).Remote(Path("b_started"), Path("release"));
  ASSERT_TRUE(WaitFor([&] { return Pids(Path("b_started")).size() == 1; }));
  int a = Pids(Path("a_started"))[0], b = Pids(Path("b_started"))[0];
  SetMemoryAboveThreshold();
  ASSERT_TRUE(WaitFor([&] { return Gone(a) || Gone(b); })) << "no worker was killed";
  EXPECT_TRUE(Gone(a)) << "the non-retriable (newer) actor was killed before the retriable one";
  SetMemory(16 * kGiB, 8 * kGiB);
  EXPECT_THROW(orrery::Get(first, 60000), orrery::OutOfMemoryError);
  std::ofstream(Path("release")).close();
  // Had the test been too slow to lower the memory again, the node rightly killed the other
  // actor next; its call then fails the same way.
  try {
    EXPECT_EQ(*orrery::Get(second, 60000), 1);
  } catch (const orrery::OutOfMemoryError&) {
  }
}

TEST_F(MemoryMonitorTest, RetriableTaskIsRetriedAndOneWithoutRetriesFails) {
  auto ref = orrery::Task(HogTask).SetMaxRetries(3).Remote(Path("t_started"), Path("release"));
  ASSERT_TRUE(WaitFor([&] { return Pids(Path("t_started")).size() == 1; }));
  SetMemoryAboveThreshold();
  ASSERT_TRUE(WaitFor([&] { return Gone(Pids(Path("t_started"))[0]); }))
      << "the task's worker was not killed";
  SetMemory(16 * kGiB, 8 * kGiB);
  ASSERT_TRUE(WaitFor([&] { return Pids(Path("t_started")).size() >= 2; }))
      << "the task was not retried";
  std::ofstream(Path("release")).close();
  EXPECT_EQ(*orrery::Get(ref, 60000), 7);

  std::filesystem::remove(Path("release"));
  auto once = orrery::Task(HogTask).Remote(Path("u_started"), Path("release"));
  ASSERT_TRUE(WaitFor([&] { return Pids(Path("u_started")).size() == 1; }));
  SetMemoryAboveThreshold();
  try {
    orrery::Get(once, 60000);
    FAIL() << "expected OutOfMemoryError";
  } catch (const orrery::OutOfMemoryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("node " + node_));
    EXPECT_THAT(e.what(), HasSubstr("threshold 0.95"));
  }
  SetMemory(16 * kGiB, 8 * kGiB);
}

TEST_F(MemoryMonitorTest, NodeMemoryInNodesRedisAndStatus) {
  ASSERT_TRUE(WaitFor([] { return orrery::Nodes()[0].memory_total_bytes == 16 * kGiB; }));
  auto n = orrery::Nodes()[0];
  EXPECT_EQ(n.memory_used_bytes, 8 * kGiB);
  EXPECT_DOUBLE_EQ(n.memory_usage_threshold, 0.95);

  orrery_cluster::Redis r(cluster_.redis_address());
  ASSERT_TRUE(r.ok());
  auto record = [&] {
    return nlohmann::json::parse(r.HGet("orrery:default:nodes", node_), nullptr, false);
  };
  ASSERT_TRUE(WaitFor([&] {
    return record().is_object() && record().value("memory_total_bytes", 0ll) == 16 * kGiB;
  })) << r.HGet("orrery:default:nodes", node_);
  EXPECT_EQ(record()["memory_used_bytes"], 8 * kGiB);
  EXPECT_EQ(record()["memory_usage_threshold"], 0.95);
  // A heartbeat after usage moved rewrites the record.
  SetMemory(16 * kGiB, 4 * kGiB);
  EXPECT_TRUE(WaitFor([&] { return record().value("memory_used_bytes", 0ll) == 12 * kGiB; }))
      << r.HGet("orrery:default:nodes", node_);

  std::string cmd = orrery_cluster::CliPath() + " status --address " + cluster_.head_address() +
                    " --redis-address " + cluster_.redis_address() + " 2>&1";
  std::string out;
  ASSERT_TRUE(WaitFor([&] {
    out.clear();
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return false;
    char buf[4096];
    while (size_t k = fread(buf, 1, sizeof(buf), p)) out.append(buf, k);
    pclose(p);
    return out.find("memory in use 12.00/16.00 GiB (75.0%), threshold 0.95") != std::string::npos;
  })) << out;
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
