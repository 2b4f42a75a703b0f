// A node the head refuses does not believe it joined: `orrery node` exits non-zero at once,
// printing the head's reason, and writes no readiness file (so nothing waiting on that file
// takes it for a member of the cluster). A node refused later, on a heartbeat, stops and
// exits non-zero with the reason instead of heartbeating on.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/internal/protocol.h"
#include "core/internal/transport.h"
#include "orrery/orrery.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/skip_exit_code.h"

using orrery_cluster::WaitFor;

namespace {

TEST(NodeRefused, ExitsWithTheHeadsReasonAndNoReadyFile) {
  orrery_cluster::Cluster cluster;
  cluster.StartHead();
  std::string ready = cluster.dir() + "/refused-node.ready";
  std::string log = cluster.dir() + "/refused-node.log";
  // The head refuses a node whose label value is not UTF-8 (an Ack with ok=false).
  int pid = orrery_cluster::Spawn({orrery_cluster::CliPath(), "node", "--address",
                                   cluster.head_address(), "--num-cpus", "1", "--labels",
                                   "region=s\xfc"
                                   "d",
                                   "--ready-file", ready},
                                  log);
  int status = 0;
  bool exited = WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 30000);
  if (!exited) orrery_cluster::KillHard(pid);
  ASSERT_TRUE(exited) << "a refused node kept running:\n" << orrery_cluster::LogTail(log);
  ASSERT_TRUE(WIFEXITED(status)) << orrery_cluster::LogTail(log);
  EXPECT_NE(WEXITSTATUS(status), 0) << orrery_cluster::LogTail(log);
  std::string tail = orrery_cluster::LogTail(log);
  EXPECT_NE(tail.find("refused this node"), std::string::npos) << tail;
  EXPECT_NE(tail.find("UTF-8"), std::string::npos) << "the head's reason is missing:\n" << tail;
  EXPECT_FALSE(std::filesystem::exists(ready)) << "a refused node wrote its readiness file";
}

// A head of the test's: it accepts the node's first registrations, then refuses its
// heartbeats, as a head does for a node the autoscaler removed.
TEST(NodeRefused, ANodeRefusedOnAHeartbeatExitsWithTheReason) {
  orrery_cluster::Cluster cluster;  // its directory and token only: no Redis, no head
  orrery::transport::Inbox head;
  ASSERT_TRUE(head.Bind("127.0.0.1").ok());
  std::atomic<int> registrations{0};
  head.Start([&](orrery::transport::Envelope& env) {
    if (env.type != orrery::proto::MsgType::kRegisterNode) return;
    orrery::proto::RegisterNodeMsg m;
    if (!env.Decode(&m).ok() || !m.node.alive) return;
    orrery::proto::AckMsg ack;
    if (++registrations > 3) {
      ack.ok = false;
      ack.message = "the autoscaler removed this node";
    }
    orrery::transport::Send(m.reply_to, orrery::proto::MsgType::kAck, ack);
  });
  std::string ready = cluster.dir() + "/node.ready";
  std::string log = cluster.dir() + "/node.log";
  int pid =
      orrery_cluster::Spawn({orrery_cluster::CliPath(), "node", "--address", head.address(),
                             "--num-cpus", "1", "--heartbeat-s", "0.1", "--ready-file", ready},
                            log);
  int status = 0;
  bool exited = WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 30000);
  if (!exited) orrery_cluster::KillHard(pid);
  head.Stop();
  std::string tail = orrery_cluster::LogTail(log);
  ASSERT_TRUE(exited) << "a node refused on a heartbeat kept running:\n" << tail;
  EXPECT_TRUE(std::filesystem::exists(ready)) << "it was up before it was refused:\n" << tail;
  ASSERT_TRUE(WIFEXITED(status)) << tail;
  EXPECT_NE(WEXITSTATUS(status), 0) << tail;
  EXPECT_NE(tail.find("the autoscaler removed this node"), std::string::npos) << tail;
  EXPECT_GT(registrations.load(), 3);
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
