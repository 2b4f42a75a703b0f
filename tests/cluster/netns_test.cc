// A node in its own network namespace (its own address, reached over a veth pair), joining a
// head in the root namespace: the cluster works across real separate addresses. Skipped
// where network namespaces cannot be created (not root, no iproute2).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/internal/security.h"
#include "orrery/orrery.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/skip_exit_code.h"

namespace {

using orrery_cluster::WaitFor;

class Where {
 public:
  static Where* Create() { return new Where(); }
  std::string Ip() {
    const char* ip = std::getenv("ORRERY_NODE_IP");
    return ip ? ip : "127.0.0.1";
  }
  int Twice(int x) { return 2 * x; }
};
ORRERY_REMOTE(Where::Create, &Where::Ip, &Where::Twice);

bool Sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

class NetnsTest : public ::testing::Test {
 protected:
  // The head's tolerance here (1 s heartbeats): a node cut off is dead this long after it was
  // last heard from.
  static constexpr int kToleranceS = 10;

  void SetUp() override {
    int id = getpid() % 200 + 20;
    ns_ = "orrery_t" + std::to_string(getpid());
    veth_ = "orv" + std::to_string(getpid());
    host_ip_ = "10.231." + std::to_string(id) + ".1";
    ns_ip_ = "10.231." + std::to_string(id) + ".2";
    if (!Sh("ip netns add " + ns_)) GTEST_SKIP() << "cannot create network namespaces here";
    created_ = true;
    ASSERT_TRUE(Sh("ip netns exec " + ns_ + " ip link set lo up"));
    ASSERT_TRUE(Sh("ip link add " + veth_ + "a type veth peer name " + veth_ + "b"));
    ASSERT_TRUE(Sh("ip link set " + veth_ + "b netns " + ns_));
    ASSERT_TRUE(Sh("ip addr add " + host_ip_ + "/24 dev " + veth_ + "a"));
    ASSERT_TRUE(Sh("ip link set " + veth_ + "a up"));
    ASSERT_TRUE(Sh("ip netns exec " + ns_ + " ip addr add " + ns_ip_ + "/24 dev " + veth_ + "b"));
    ASSERT_TRUE(Sh("ip netns exec " + ns_ + " ip link set " + veth_ + "b up"));

    char tmpl[] = "/tmp/orrery_netns_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
    setenv("ORRERY_TMPDIR", dir_.c_str(), 1);
    // Authentication on, as by default: every process here reads the cluster's token.
    ASSERT_TRUE(
        orrery::security::WriteSecretFile(dir_ + "/token", orrery::security::NewToken()).ok());
    setenv("ORRERY_TOKEN_FILE", (dir_ + "/token").c_str(), 1);
    // Redis with a password, as `orrery start --head` starts it: in a 0600 config file.
    const std::string password_file = dir_ + "/redis_password";
    const std::string password = orrery::security::NewToken();
    ASSERT_TRUE(orrery::security::WriteSecretFile(password_file, password).ok());
    auto [redis_pid, rport] = orrery_cluster::StartRedisServer(
        [](const std::vector<std::string>& argv, const std::string& log) {
          return orrery_cluster::Spawn(argv, log);
        },
        dir_ + "/redis.conf",
        "bind 127.0.0.1\nsave \"\"\ndir \"" + dir_ + "\"\nrequirepass " + password, password,
        dir_ + "/redis.log");
    redis_ = redis_pid;
    head_ = orrery_cluster::Spawn(
        {orrery_cluster::CliPath(), "head", "--bind", host_ip_, "--port", "0", "--redis-address",
         "127.0.0.1:" + std::to_string(rport), "--redis-password-file", password_file,
         "--health-check-failure-threshold", std::to_string(kToleranceS), "--ready-file",
         dir_ + "/head.ready"},
        dir_ + "/head.log");
    head_address_ =
        orrery_cluster::WaitReady(dir_ + "/head.ready", head_, dir_ + "/head.log").address;
    // The node lives in the namespace: its only way to the head is the veth pair.
    node_ = orrery_cluster::Spawn({"ip", "netns", "exec", ns_, orrery_cluster::CliPath(), "node",
                                   "--address", head_address_, "--bind", ns_ip_, "--num-cpus", "2",
                                   "--labels", "place=netns", "--ready-file", dir_ + "/node.ready"},
                                  dir_ + "/node.log");
    orrery_cluster::WaitReady(dir_ + "/node.ready", node_, dir_ + "/node.log");
  }

  void TearDown() override {
    if (IsSkipped() || !created_) return;
    if (orrery::IsInitialized()) orrery::Shutdown();
    orrery_cluster::KillHard(node_);
    orrery_cluster::KillHard(head_);
    orrery_cluster::KillHard(redis_);
    Sh("ip link del " + veth_ + "a");
    Sh("ip netns del " + ns_);
    std::system(("rm -rf " + dir_).c_str());
  }

  std::string ns_, veth_, host_ip_, ns_ip_, dir_, head_address_;
  bool created_ = false;
  int redis_ = -1, head_ = -1, node_ = -1;
};

TEST_F(NetnsTest, ANodeInItsOwnNamespaceRunsActorsForADriverOutsideIt) {
  orrery::Config c;
  c.address = head_address_;
  c.node_ip = host_ip_;  // the driver's own socket must be reachable from the namespace
  orrery::Init(c);
  ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == 1; }));
  auto nodes = orrery::Nodes();
  EXPECT_NE(nodes[0].address.find(ns_ip_), std::string::npos) << nodes[0].address;
  auto a = orrery::Actor(Where::Create).SetLabelSelector({{"place", "netns"}}).Remote();
  EXPECT_EQ(*orrery::Get(a.Task(&Where::Ip).Remote(), 30000), ns_ip_);
  EXPECT_EQ(*orrery::Get(a.Task(&Where::Twice).Remote(21), 30000), 42);
}

// A node cut off from the head (its link down: no heartbeat arrives, and the head's probes
// reach nothing) is suspected at once and declared dead after the tolerance, not before: an
// unreachable machine is not a killed process.
TEST_F(NetnsTest, ANodeCutOffIsSuspectedThenDeadAfterTheTolerance) {
  orrery::Config c;
  c.address = head_address_;
  orrery::Init(c);
  ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == 1 && orrery::Nodes()[0].alive; }));
  auto cut = std::chrono::steady_clock::now();
  // The namespace's end goes down: the host's route to it stays (marked linkdown), so the
  // head's packets to the node vanish as on a cut cable. Taking the host's end down would
  // remove that route and send them to the default gateway, which may answer with a reset.
  ASSERT_TRUE(Sh("ip netns exec " + ns_ + " ip link set " + veth_ + "b down"));
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - cut).count();
  };
  EXPECT_TRUE(WaitFor([] { return orrery::Nodes()[0].suspected; }, 8000))
      << "not suspected " << seconds() << " s after it was cut off";
  ASSERT_TRUE(WaitFor([] { return !orrery::Nodes()[0].alive; }, (kToleranceS + 10) * 1000))
      << "still alive " << seconds() << " s after it was cut off";
  double dead_after = seconds();
  std::printf("a node cut off was declared dead after %.1f s (tolerance %d s)\n", dead_after,
              kToleranceS);
  EXPECT_GE(dead_after, kToleranceS - 1.5) << "declared dead before the tolerance";
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
