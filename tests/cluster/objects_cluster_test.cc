// Large values between nodes (docs/objects.md "Between nodes"): a driver's value read by a
// task on another node, a task's result read by the driver and by a task elsewhere, sizes
// from 1 KiB to 256 MiB; and the node holding a value killed while another pulls it: the
// reader's Get fails with ObjectLostError instead of hanging.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "orrery/orrery.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/skip_exit_code.h"

namespace {

using orrery_cluster::WaitFor;
using Bytes = std::vector<uint8_t>;

Bytes Pattern(size_t size, uint32_t seed) {
  Bytes b(size);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < size; ++i) {
    x = x * 1664525u + 1013904223u;
    b[i] = uint8_t(x >> 24);
  }
  return b;
}

uint64_t Checksum(const Bytes& b) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < b.size(); i += 61) h = (h ^ b[i]) * 1099511628211ull;
  return h ^ b.size();
}

uint64_t SumBytes(Bytes b) { return Checksum(b); }
Bytes MakeBytes(uint64_t size, uint32_t seed) { return Pattern(size, seed); }

constexpr int kGetMs = 120000;

orrery::NodeAffinitySchedulingStrategy On(const std::string& node_hex);

// A stream of n values of `size` bytes (docs/api.md "Streaming results").
orrery::Stream<Bytes> StreamBytes(int n, uint64_t size) {
  for (int i = 0; i < n; ++i) co_yield Pattern(size, uint32_t(i));
}
// The checksums of a stream made on `node_hex`, read by this task, added up.
uint64_t SumOfStream(std::string node_hex, int n, uint64_t size) {
  uint64_t sum = 0;
  auto gen = orrery::Task(StreamBytes).SetSchedulingStrategy(On(node_hex)).Remote(n, size);
  while (auto ref = gen.Next(kGetMs)) sum += Checksum(*orrery::Get(*ref, kGetMs));
  return sum;
}
ORRERY_REMOTE(SumBytes, MakeBytes, StreamBytes, SumOfStream);

std::string NodeWithLabel(const std::string& value) {
  for (const auto& n : orrery::Nodes())
    if (n.alive && n.labels.count("side") && n.labels.at("side") == value) return n.node_id.Hex();
  return "";
}

orrery::NodeAffinitySchedulingStrategy On(const std::string& node_hex) {
  return orrery::NodeAffinitySchedulingStrategy{orrery::NodeId::FromHex(node_hex), false};
}

// Node "a" starts first, so the driver (which maps the store of a node on its host) uses a's
// store: what it puts lives on a, and a task on "b" pulls it.
class ObjectsClusterTest : public ::testing::Test {
 protected:
  void Start(bool hold_transfers) {
    // A node that misses heartbeats for 3 s is dead: these tests are not about detecting
    // deaths, and beside other tests (ctest -j) a tolerance of 1 s took a busy node for dead.
    cluster_.StartHead(0.2, 15);
    if (hold_transfers) setenv("ORRERY_TEST_OBJECT_SERVE_HOLD", hold_.c_str(), 1);
    cluster_.AddNode("", "side=a", 2);
    unsetenv("ORRERY_TEST_OBJECT_SERVE_HOLD");
    orrery::Config c;
    c.address = cluster_.head_address();
    orrery::Init(c);
    cluster_.AddNode("", "side=b", 2);
    ASSERT_TRUE(WaitFor([] { return !NodeWithLabel("a").empty() && !NodeWithLabel("b").empty(); }));
    a_ = NodeWithLabel("a");
    b_ = NodeWithLabel("b");
  }
  void TearDown() override {
    if (orrery::IsInitialized()) orrery::Shutdown();
    std::remove(hold_.c_str());
    std::remove((hold_ + ".serving").c_str());
  }

  orrery_cluster::Cluster cluster_;
  std::string a_, b_;
  std::string hold_ = "/tmp/orrery-objects-hold-" + std::to_string(getpid());
};

TEST_F(ObjectsClusterTest, ValuesOfEverySizeMoveBetweenNodes) {
  Start(false);
  for (size_t size : {size_t(1) << 10, size_t(1) << 20, size_t(256) << 20, size_t(1) << 30}) {
    SCOPED_TRACE("size " + std::to_string(size));
    Bytes value = Pattern(size, 9);
    uint64_t sum = Checksum(value);
    auto ref = orrery::Put(value);
    // Driver (store of a) -> task on b, and on a.
    EXPECT_EQ(
        *orrery::Get(orrery::Task(SumBytes).SetSchedulingStrategy(On(b_)).Remote(ref), kGetMs),
        sum);
    EXPECT_EQ(
        *orrery::Get(orrery::Task(SumBytes).SetSchedulingStrategy(On(a_)).Remote(ref), kGetMs),
        sum);
    // A result made on b: read by the driver, and by a task on a.
    auto made = orrery::Task(MakeBytes).SetSchedulingStrategy(On(b_)).Remote(uint64_t(size), 9u);
    EXPECT_EQ(Checksum(*orrery::Get(made, kGetMs)), sum);
    EXPECT_EQ(
        *orrery::Get(orrery::Task(SumBytes).SetSchedulingStrategy(On(a_)).Remote(made), kGetMs),
        sum);
  }
}

TEST_F(ObjectsClusterTest, StreamsCrossNodes) {
  Start(false);
  for (uint64_t size : {uint64_t(64), uint64_t(1) << 20}) {
    SCOPED_TRACE("size " + std::to_string(size));
    uint64_t want = 0;
    for (int i = 0; i < 40; ++i) want += Checksum(Pattern(size, uint32_t(i)));
    // Made on b, read by the driver (on a's host and store).
    auto gen = orrery::Task(StreamBytes).SetSchedulingStrategy(On(b_)).Remote(40, size);
    uint64_t sum = 0;
    int count = 0;
    while (auto ref = gen.Next(kGetMs)) {
      sum += Checksum(*orrery::Get(*ref, kGetMs));
      ++count;
    }
    EXPECT_EQ(count, 40);
    EXPECT_EQ(sum, want);
    // Made on b, read by a task on a.
    EXPECT_EQ(
        *orrery::Get(orrery::Task(SumOfStream).SetSchedulingStrategy(On(a_)).Remote(b_, 40, size),
                     kGetMs),
        want);
  }
}

TEST_F(ObjectsClusterTest, SourceNodeKilledDuringAPullFailsTheReaderWithObjectLost) {
  Start(true);
  {
    FILE* f = std::fopen(hold_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  auto ref = orrery::Put(Pattern(64 << 20, 4));
  auto sum = orrery::Task(SumBytes).SetSchedulingStrategy(On(b_)).Remote(ref);
  ASSERT_TRUE(WaitFor([&] { return access((hold_ + ".serving").c_str(), F_OK) == 0; }, 60000))
      << "node b should start pulling from node a";
  cluster_.KillNode(0);  // node a, mid-transfer
  EXPECT_THROW(orrery::Get(sum, kGetMs), orrery::ObjectLostError);
}

uint64_t StoreUsed(const std::string& node_hex) {
  for (const auto& n : orrery::Nodes())
    if (n.node_id.Hex() == node_hex) return uint64_t(n.object_store_used_bytes);
  return 0;
}

// `objects_cluster_test --put-and-wait HOST:PORT`: a driver that puts a large value into its
// node's store, says so, and waits to be killed.
int PutAndWait(const std::string& address) {
  orrery::Config c;
  c.address = address;
  orrery::Init(c);
  auto ref = orrery::Put(Pattern(32 << 20, 5));
  std::printf("put %s\n", ref.ID().Hex().c_str());
  std::fflush(stdout);
  while (true) pause();
}

TEST_F(ObjectsClusterTest, ObjectsOfADriverKilledWithoutShutdownAreFreed) {
  Start(false);
  std::string log = cluster_.dir() + "/put_and_wait.log";
  int pid =
      orrery_cluster::Spawn({"/proc/self/exe", "--put-and-wait", cluster_.head_address()}, log);
  ASSERT_TRUE(WaitFor([&] { return StoreUsed(a_) >= (32u << 20); }, 60000))
      << "the driver's value should be in node a's store\n"
      << orrery_cluster::LogTail(log);
  orrery_cluster::KillHard(pid);
  EXPECT_TRUE(WaitFor([&] { return StoreUsed(a_) == 0; }, 60000))
      << "node a frees the objects of an owner that no longer answers";
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  if (argc == 3 && std::string(argv[1]) == "--put-and-wait") return PutAndWait(argv[2]);
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
