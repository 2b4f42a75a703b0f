// A node the head refuses does not believe it joined: `orrery node` exits non-zero at once,
// printing the head's reason, and writes no readiness file (so nothing waiting on that file
// takes it for a member of the cluster).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <string>

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

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
