// Multi-node integration tests: a real redis-server, an `orrery head` daemon and node
// daemons with different resources and labels, all on loopback; this binary is the driver.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "orrery/orrery.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/skip_exit_code.h"

using orrery_cluster::WaitFor;
using ::testing::HasSubstr;

namespace {

class Probe {
 public:
  static Probe* Create() { return new Probe(); }
  // The node this actor runs on (the node daemon sets ORRERY_NODE_ID for its workers).
  std::string Node() {
    const char* n = std::getenv("ORRERY_NODE_ID");
    return n ? n : "";
  }
  int Inc(int by) { return value_ += by; }
  int Pid() { return int(getpid()); }

 private:
  int value_ = 0;
};
ORRERY_REMOTE(Probe::Create, &Probe::Node, &Probe::Inc, &Probe::Pid);

// "<folder it runs in>|<first line of ./notes/greeting.txt>|<$MODEL>", from inside a worker.
std::string FolderAndGreeting() {
  std::ifstream in("notes/greeting.txt");
  std::string line = "none";
  std::getline(in, line);
  const char* model = std::getenv("MODEL");
  return std::filesystem::current_path().string() + "|" + line + "|" + (model ? model : "");
}
ORRERY_REMOTE(FolderAndGreeting);

// `cluster_test --child-driver HOST:PORT`: a second driver process that creates an actor
// holding a GPU, prints the actor's worker pid, and waits to be killed.
int ChildDriver(const std::string& address) {
  orrery::Config c;
  c.address = address;
  orrery::Init(c);
  auto a = orrery::Actor(Probe::Create).SetResources({{"GPU", 1}}).Remote();
  std::printf("worker pid %d\n", *orrery::Get(a.Task(&Probe::Pid).Remote(), 30000));
  std::fflush(stdout);
  while (true) pause();
}

std::string NodeWithLabel(const std::string& key, const std::string& value) {
  for (const auto& n : orrery::Nodes())
    if (n.alive && n.labels.count(key) && n.labels.at(key) == value) return n.node_id.Hex();
  return "";
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.StartHead(0.2, 3);
    node_a_ = cluster_.AddNode("", "zone=a", 2);
    node_b_ = cluster_.AddNode("{\"GPU\": 2}", "zone=b", 2);
    node_c_ = cluster_.AddNode("{\"Custom\": 4}", "zone=c", 4);
    orrery::Config c;
    c.address = cluster_.head_address();
    c.infeasible_timeout_s = 1;
    orrery::Init(c);
    ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == 3; }))
        << "three nodes should register";
  }
  void TearDown() override { orrery::Shutdown(); }

  orrery_cluster::Cluster cluster_;
  int node_a_ = -1, node_b_ = -1, node_c_ = -1;
};

TEST_F(ClusterTest, ClusterResourcesAddUpOverNodes) {
  auto total = orrery::ClusterResources();
  EXPECT_EQ(total["CPU"], 8);
  EXPECT_EQ(total["GPU"], 2);
  EXPECT_EQ(total["Custom"], 4);
}

TEST_F(ClusterTest, ActorsLandByResourcesAndLabels) {
  auto gpu = orrery::Actor(Probe::Create).SetResources({{"GPU", 1}}).Remote();
  EXPECT_EQ(*orrery::Get(gpu.Task(&Probe::Node).Remote(), 30000), NodeWithLabel("zone", "b"));
  auto custom = orrery::Actor(Probe::Create).SetResources({{"Custom", 1}}).Remote();
  EXPECT_EQ(*orrery::Get(custom.Task(&Probe::Node).Remote(), 30000), NodeWithLabel("zone", "c"));
  auto in_a = orrery::Actor(Probe::Create).SetLabelSelector({{"zone", "a"}}).Remote();
  EXPECT_EQ(*orrery::Get(in_a.Task(&Probe::Node).Remote(), 30000), NodeWithLabel("zone", "a"));
  auto not_ab = orrery::Actor(Probe::Create).SetLabelSelector({{"zone", "!in(a,b)"}}).Remote();
  EXPECT_EQ(*orrery::Get(not_ab.Task(&Probe::Node).Remote(), 30000), NodeWithLabel("zone", "c"));
  auto in_bc = orrery::Actor(Probe::Create)
                   .SetResources({{"CPU", 1}})
                   .SetLabelSelector({{"zone", "in(b, c)"}})
                   .Remote();
  std::string n = *orrery::Get(in_bc.Task(&Probe::Node).Remote(), 30000);
  EXPECT_TRUE(n == NodeWithLabel("zone", "b") || n == NodeWithLabel("zone", "c"));
}

TEST_F(ClusterTest, StrictSpreadPutsEachBundleOnItsOwnNode) {
  auto pg = orrery::CreatePlacementGroup({.name = "spread3",
                                          .bundles = {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}},
                                          .strategy = orrery::PlacementStrategy::STRICT_SPREAD});
  ASSERT_TRUE(pg.Wait(30));
  std::set<std::string> nodes;
  for (int i = 0; i < 3; ++i) {
    auto a =
        orrery::Actor(Probe::Create).SetResources({{"CPU", 1}}).SetPlacementGroup(pg, i).Remote();
    nodes.insert(*orrery::Get(a.Task(&Probe::Node).Remote(), 30000));
  }
  EXPECT_EQ(nodes.size(), 3u);
  orrery::RemovePlacementGroup(pg.Id());
  // Four bundles cannot be strictly spread over three nodes: the group stays pending.
  auto pg4 = orrery::CreatePlacementGroup(
      {.name = "spread4",
       .bundles = {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}},
       .strategy = orrery::PlacementStrategy::STRICT_SPREAD});
  EXPECT_FALSE(pg4.Wait(1));
  orrery::RemovePlacementGroup(pg4.Id());
}

TEST_F(ClusterTest, StrictPackNeedsOneNodeThatHoldsEverything) {
  auto pg = orrery::CreatePlacementGroup({.name = "pack",
                                          .bundles = {{{"CPU", 3}}, {{"CPU", 1}}},
                                          .strategy = orrery::PlacementStrategy::STRICT_PACK});
  ASSERT_TRUE(pg.Wait(30));
  auto a =
      orrery::Actor(Probe::Create).SetResources({{"CPU", 3}}).SetPlacementGroup(pg, 0).Remote();
  EXPECT_EQ(*orrery::Get(a.Task(&Probe::Node).Remote(), 30000), NodeWithLabel("zone", "c"));
  orrery::RemovePlacementGroup(pg.Id());
}

TEST_F(ClusterTest, SpreadPutsActorsOnDistinctNodes) {
  std::set<std::string> nodes;
  for (int i = 0; i < 3; ++i) {
    auto a = orrery::Actor(Probe::Create)
                 .SetResources({{"CPU", 1}})
                 .SetSchedulingStrategy(orrery::SpreadSchedulingStrategy{})
                 .Remote();
    nodes.insert(*orrery::Get(a.Task(&Probe::Node).Remote(), 30000));
  }
  EXPECT_EQ(nodes.size(), 3u);
}

TEST_F(ClusterTest, NodeAffinityHardAndSoft) {
  std::string c = NodeWithLabel("zone", "c");
  auto pinned = orrery::Actor(Probe::Create)
                    .SetSchedulingStrategy(
                        orrery::NodeAffinitySchedulingStrategy{orrery::NodeId::FromHex(c), false})
                    .Remote();
  EXPECT_EQ(*orrery::Get(pinned.Task(&Probe::Node).Remote(), 30000), c);
  // A node that does not exist: hard affinity cannot be met, soft affinity goes elsewhere.
  auto nowhere = orrery::NodeId::Random();
  auto hard = orrery::Actor(Probe::Create)
                  .SetSchedulingStrategy(orrery::NodeAffinitySchedulingStrategy{nowhere, false})
                  .Remote();
  EXPECT_THROW(orrery::Get(hard.Task(&Probe::Node).Remote(), 30000), orrery::InfeasibleError);
  auto soft = orrery::Actor(Probe::Create)
                  .SetSchedulingStrategy(orrery::NodeAffinitySchedulingStrategy{nowhere, true})
                  .Remote();
  EXPECT_FALSE(orrery::Get(soft.Task(&Probe::Node).Remote(), 30000)->empty());
}

TEST_F(ClusterTest, BundlesConstrainedToShareALabelValue) {
  // Two CPU bundles that must share a zone: only zone c (4 CPUs) can hold both with PACK
  // once zone a is busy; STRICT_SPREAD inside one zone (one node per zone) is impossible.
  auto pg = orrery::CreatePlacementGroup({.name = "same_zone",
                                          .bundles = {{{"CPU", 2}}, {{"CPU", 2}}},
                                          .strategy = orrery::PlacementStrategy::PACK,
                                          .same_label = "zone"});
  ASSERT_TRUE(pg.Wait(30));
  auto a =
      orrery::Actor(Probe::Create).SetResources({{"CPU", 2}}).SetPlacementGroup(pg, 1).Remote();
  EXPECT_EQ(*orrery::Get(a.Task(&Probe::Node).Remote(), 30000), NodeWithLabel("zone", "c"));
  orrery::RemovePlacementGroup(pg.Id());
  auto spread = orrery::CreatePlacementGroup({.name = "spread_same_zone",
                                              .bundles = {{{"CPU", 1}}, {{"CPU", 1}}},
                                              .strategy = orrery::PlacementStrategy::STRICT_SPREAD,
                                              .same_label = "zone"});
  EXPECT_FALSE(spread.Wait(1));
  orrery::RemovePlacementGroup(spread.Id());
}

TEST_F(ClusterTest, InfeasibleDemandFailsFastNamingIt) {
  auto a = orrery::Actor(Probe::Create).SetResources({{"TPU", 4}}).Remote();
  try {
    orrery::Get(a.Task(&Probe::Node).Remote(), 30000);
    FAIL() << "expected InfeasibleError";
  } catch (const orrery::InfeasibleError& e) {
    EXPECT_THAT(e.what(), HasSubstr("TPU"));
    EXPECT_THAT(e.what(), HasSubstr("largest node"));
  }
}

TEST_F(ClusterTest, ANewDriverSeesADetachedNamedActor) {
  auto a = orrery::Actor(Probe::Create)
               .SetName("shared")
               .SetLifetime(orrery::ActorLifetime::kDetached)
               .Remote();
  EXPECT_EQ(*orrery::Get(a.Task(&Probe::Inc).Remote(41), 30000), 41);
  orrery::Shutdown();  // the first driver goes; the detached actor stays
  orrery::Config c;
  c.address = cluster_.head_address();
  orrery::Init(c);
  auto again = orrery::GetActor<Probe>("shared");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*orrery::Get(again->Task(&Probe::Inc).Remote(1), 30000), 42);
}

TEST_F(ClusterTest, NodeKilledHardIsDetectedAndItsActorsDie) {
  auto on_b = orrery::Actor(Probe::Create).SetResources({{"GPU", 1}}).Remote();
  ASSERT_EQ(*orrery::Get(on_b.Task(&Probe::Node).Remote(), 30000), NodeWithLabel("zone", "b"));
  std::string b = NodeWithLabel("zone", "b");
  orrery_cluster::KillHard(node_b_);
  // Threshold: 3 missed heartbeats of 0.2 s; allow generous scheduling slack.
  EXPECT_TRUE(WaitFor(
      [&] {
        for (const auto& n : orrery::Nodes())
          if (n.node_id.Hex() == b) return !n.alive;
        return false;
      },
      10000));
  EXPECT_THROW(orrery::Get(on_b.Task(&Probe::Inc).Remote(1), 30000), orrery::ActorDiedError);
  EXPECT_EQ(orrery::ClusterResources()["GPU"], 0);
}

TEST_F(ClusterTest, ADriverKilledHardLosesItsActorsAndTheirResources) {
  std::string log = cluster_.dir() + "/child.log";
  int child =
      orrery_cluster::Spawn({"/proc/self/exe", "--child-driver", cluster_.head_address()}, log);
  int worker = 0;
  ASSERT_TRUE(WaitFor([&] {
    std::ifstream in(log);
    std::string word1, word2;
    in >> word1 >> word2 >> worker;
    return word1 == "worker" && worker > 0;
  }));
  EXPECT_EQ(orrery::AvailableResources()["GPU"], 1);
  orrery_cluster::KillHard(child);
  // The head notices the silent driver and stops its (non-detached) actor.
  EXPECT_TRUE(WaitFor([&] { return kill(worker, 0) != 0; }, 30000))
      << "worker " << worker << " outlived its driver";
  EXPECT_TRUE(WaitFor([] { return orrery::AvailableResources()["GPU"] == 2; }, 10000));
}

TEST_F(ClusterTest, ANodeWithoutTheDriversExecutableFetchesItFromTheHead) {
  // A copy of this executable runs as a driver; once it has joined, the copy is deleted, so
  // the nodes cannot find it at its path and must fetch it from the head by content hash.
  std::string copy = cluster_.dir() + "/driver_copy";
  std::filesystem::copy_file("/proc/self/exe", copy);
  std::filesystem::permissions(copy, std::filesystem::perms::owner_all);
  std::string marker = cluster_.dir() + "/go", log = cluster_.dir() + "/copy_driver.log";
  int child = orrery_cluster::Spawn({copy, "--fetch-driver", cluster_.head_address(), marker}, log);
  auto log_has = [&](const std::string& needle) {
    std::ifstream in(log);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return content.find(needle) != std::string::npos;
  };
  ASSERT_TRUE(WaitFor([&] { return log_has("registered"); }));
  std::filesystem::remove(copy);
  std::ofstream(marker).close();
  EXPECT_TRUE(WaitFor([&] { return log_has("value 5"); }, 60000)) << "the actor did not run";
  orrery_cluster::KillHard(child);
  bool fetched = false;
  for (const auto& entry : std::filesystem::directory_iterator(cluster_.dir())) {
    std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || name.rfind("node", 0) != 0) continue;
    std::ifstream in(entry.path());
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fetched = fetched || content.find("cached the driver's executable") != std::string::npos;
  }
  EXPECT_TRUE(fetched) << "no node logged fetching the executable";
}

TEST_F(ClusterTest, AWorkingDirANodeCannotSeeIsShippedToItByTheHead) {
  std::string folder = cluster_.dir() + "/project";
  std::filesystem::create_directories(folder + "/notes");
  std::ofstream(folder + "/notes/greeting.txt") << "hello from the submitter\n";
  std::string real = std::filesystem::canonical(folder).string();
  // A node that sees the submitter's very folder runs the task in it.
  orrery::RuntimeEnv env{.env_vars = {{"MODEL", "small"}}, .working_dir = folder};
  EXPECT_EQ(*orrery::Get(orrery::Task(FolderAndGreeting).SetRuntimeEnv(env).Remote(), 30000),
            real + "|hello from the submitter|small");
  // A task that waits for node c's Custom resource (held by an actor) is submitted, and its
  // folder moved away: the node that runs it no longer sees it, and gets it from the head.
  auto holder = orrery::Actor(Probe::Create).SetResources({{"Custom", 4}}).Remote();
  ASSERT_EQ(*orrery::Get(holder.Task(&Probe::Inc).Remote(1), 30000), 1);
  env.env_vars["MODEL"] = "large";  // not a worker of the task above
  auto later =
      orrery::Task(FolderAndGreeting).SetResources({{"Custom", 1}}).SetRuntimeEnv(env).Remote();
  std::filesystem::rename(folder, folder + ".moved");
  holder.Kill();
  std::string seen = *orrery::Get(later, 60000);
  std::string cwd = seen.substr(0, seen.find('|'));
  EXPECT_NE(cwd, real);
  EXPECT_THAT(cwd, HasSubstr("/working_dirs/")) << "not the node's copy of the package";
  EXPECT_EQ(seen.substr(seen.find('|')), "|hello from the submitter|large");
  // The copy is the folder as it was submitted, kept for later work with the same folder.
  EXPECT_TRUE(std::filesystem::exists(cwd + "/notes/greeting.txt"));
}

TEST_F(ClusterTest, HeadKilledAndRestartedLosesNothing) {
  auto keeper = orrery::Actor(Probe::Create).SetName("keeper").Remote();
  ASSERT_EQ(*orrery::Get(keeper.Task(&Probe::Inc).Remote(1), 30000), 1);
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::thread caller([&] {
    while (!stop) {
      try {
        orrery::Get(keeper.Task(&Probe::Inc).Remote(1), 10000);
        ++ok;
      } catch (const std::exception&) {
        ++failed;
      }
    }
  });
  ASSERT_TRUE(WaitFor([&] { return ok > 20; }));
  cluster_.KillHead();
  int before = ok;
  // Calls to the existing actor keep working while the head is down.
  EXPECT_TRUE(WaitFor([&] { return ok > before + 50; }));
  cluster_.StartHead(0.2, 3);  // the same command, the same port
  EXPECT_TRUE(WaitFor([&] {
    try {
      return orrery::GetActor<Probe>("keeper").has_value();
    } catch (const orrery::Error&) {
      return false;
    }
  }));
  stop = true;
  caller.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(orrery::Nodes().size(), 3u);
  // New actors can be created.
  auto fresh = orrery::Actor(Probe::Create).Remote();
  EXPECT_EQ(*orrery::Get(fresh.Task(&Probe::Inc).Remote(7), 30000), 7);
}

}  // namespace

// `driver_copy --fetch-driver HOST:PORT MARKER`: joins, says so, waits for MARKER, then
// creates an actor and prints what it returns.
int FetchDriver(const std::string& address, const std::string& marker) {
  orrery::Config c;
  c.address = address;
  orrery::Init(c);
  std::printf("registered\n");
  std::fflush(stdout);
  WaitFor([&] { return access(marker.c_str(), F_OK) == 0; }, 60000);
  auto a = orrery::Actor(Probe::Create).Remote();
  std::printf("value %d\n", *orrery::Get(a.Task(&Probe::Inc).Remote(5), 60000));
  std::fflush(stdout);
  while (true) pause();
}

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  if (argc == 4 && std::string(argv[1]) == "--fetch-driver") return FetchDriver(argv[2], argv[3]);
  if (argc == 3 && std::string(argv[1]) == "--child-driver") return ChildDriver(argv[2]);
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
