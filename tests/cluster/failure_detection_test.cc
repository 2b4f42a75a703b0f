// Failure detection with the head's default tolerance (docs/architecture.md "Failure
// detection"): a node paused with SIGSTOP for 10 s is only suspected (no new work goes there)
// and keeps its actors; a node killed with kill -9 is declared dead within 5 s, found by the
// probe that meets nothing listening at its address.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "orrery/orrery.h"
#include "tests/cluster/cluster_fixture.h"

using orrery_cluster::WaitFor;

namespace {

class Where {
 public:
  static Where* Create() { return new Where(); }
  int Inc(int by) { return value_ += by; }

 private:
  int value_ = 0;
};
ORRERY_REMOTE(Where::Create, &Where::Inc);

class FailureDetectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.StartHead(1.0, 30);  // the defaults: suspected after 3 s, dead after 30 s
    cluster_.AddNode("", "zone=a", 2);
    watched_pid_ = cluster_.AddNode("", "zone=b", 2);
    orrery::Config c;
    c.address = cluster_.head_address();
    orrery::Init(c);
    ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == 2; }));
    for (const auto& n : orrery::Nodes())
      if (n.labels.count("zone") && n.labels.at("zone") == "b") watched_ = n.node_id.Hex();
    ASSERT_FALSE(watched_.empty());
  }
  void TearDown() override {
    if (watched_pid_ > 0) kill(watched_pid_, SIGCONT);
    orrery::Shutdown();
  }

  // What the head says of node zone=b.
  orrery::NodeInfo Watched() {
    for (const auto& n : orrery::Nodes())
      if (n.node_id.Hex() == watched_) return n;
    return {};
  }

  orrery_cluster::Cluster cluster_;
  int watched_pid_ = -1;
  std::string watched_;
};

TEST_F(FailureDetectionTest, ANodePausedForTenSecondsIsSuspectedAndKeepsItsActors) {
  auto actor = orrery::Actor(Where::Create).SetLabelSelector({{"zone", "b"}}).Remote();
  ASSERT_EQ(*orrery::Get(actor.Task(&Where::Inc).Remote(1), 30000), 1);
  auto stopped = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(watched_pid_, SIGSTOP), 0);
  ASSERT_TRUE(WaitFor([&] { return Watched().suspected; }, 10000))
      << "a node silent for 3 heartbeats should be suspected";
  // While it is suspected, new work that only it can take waits instead of landing there.
  auto waiting = orrery::Actor(Where::Create).SetLabelSelector({{"zone", "b"}}).Remote();
  auto waiting_call = waiting.Task(&Where::Inc).Remote(5);
  EXPECT_TRUE(
      orrery::Wait(std::vector<orrery::ObjectRef<int>>{waiting_call}, 1, 1000).ready.empty())
      << "new work landed on a suspected node";
  // The actor's own process is not paused: it keeps answering its caller.
  EXPECT_EQ(*orrery::Get(actor.Task(&Where::Inc).Remote(1), 30000), 2);
  // Watched for the whole pause (5 looks a second): never declared dead.
  while (std::chrono::steady_clock::now() - stopped < std::chrono::seconds(10)) {
    ASSERT_TRUE(Watched().alive) << "a paused node was declared dead";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(kill(watched_pid_, SIGCONT), 0);
  EXPECT_TRUE(WaitFor([&] { return !Watched().suspected; }, 10000));
  EXPECT_TRUE(Watched().alive);
  EXPECT_EQ(*orrery::Get(actor.Task(&Where::Inc).Remote(1), 30000), 3);
  EXPECT_EQ(*orrery::Get(waiting_call, 30000), 5);  // placed once the node was heard again
}

TEST_F(FailureDetectionTest, ANodeKilledIsDeclaredDeadWithinFiveSeconds) {
  auto actor = orrery::Actor(Where::Create).SetLabelSelector({{"zone", "b"}}).Remote();
  ASSERT_EQ(*orrery::Get(actor.Task(&Where::Inc).Remote(1), 30000), 1);
  auto killed = std::chrono::steady_clock::now();
  orrery_cluster::KillHard(watched_pid_);
  watched_pid_ = -1;
  bool dead = WaitFor([&] { return !Watched().alive; }, 5000);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::printf("a node killed with kill -9 was declared dead after %.1f s\n", seconds);
  EXPECT_TRUE(dead) << "still alive " << seconds << " s after kill -9";
  EXPECT_THROW(orrery::Get(actor.Task(&Where::Inc).Remote(1), 30000), orrery::Error);
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
