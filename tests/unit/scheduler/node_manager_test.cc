// NodeManager: registration, heartbeats, node secrets, health, records and their restore.
#include <gtest/gtest.h>

#include "tests/unit/scheduler/head_harness.h"

namespace orrery::scheduler {
namespace {

using proto::MsgType;
using testing::HeadHarness;

proto::RegisterNodeMsg Registration(const NodeId& id, const std::string& secret) {
  proto::RegisterNodeMsg m;
  m.node.node_id = id.Binary();
  m.node.address = "tcp://127.0.0.1:1";
  m.node.total = {{"CPU", 4}};
  m.node_secret = secret;
  m.reply_to = "tcp://node";
  return m;
}

TEST(NodeManagerTest, RegistersHeartbeatsAndSaysGoodbye) {
  HeadHarness h;
  NodeId id = NodeId::Random();
  auto m = Registration(id, "secret-a");
  int i = -1;
  EXPECT_EQ(h.nodes.OnRegister(m, 10, &i), NodeManager::Registration::kJoined);
  ASSERT_EQ(i, 0);
  auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck, "tcp://node");
  ASSERT_TRUE(ack);
  EXPECT_TRUE(ack->ok);
  EXPECT_EQ(h.nodes.address(0), "tcp://127.0.0.1:1");
  EXPECT_EQ(h.Table("nodes").count(id.Hex()), 1u);

  EXPECT_EQ(h.nodes.OnRegister(m, 12, &i), NodeManager::Registration::kHeartbeat);
  EXPECT_EQ(h.nodes.at(0).last_seen, 12);
  m.node.alive = false;
  EXPECT_EQ(h.nodes.OnRegister(m, 13, &i), NodeManager::Registration::kLeft);
}

TEST(NodeManagerTest, OnlyTheNodeItselfMaySpeakForItsId) {
  HeadHarness h;
  NodeId id = NodeId::Random();
  int i = -1;
  ASSERT_EQ(h.nodes.OnRegister(Registration(id, "secret-a"), 0, &i),
            NodeManager::Registration::kJoined);
  auto spoofed = Registration(id, "secret-b");
  spoofed.node.alive = false;
  EXPECT_EQ(h.nodes.OnRegister(spoofed, 1, &i), NodeManager::Registration::kIgnored);
  EXPECT_TRUE(h.nodes.alive(0));
  EXPECT_FALSE(h.nodes.FromNode(id.Binary(), "secret-b", "worker event", false));
  EXPECT_FALSE(h.nodes.FromNode(id.Binary(), "", "worker event", false));
  EXPECT_TRUE(h.nodes.FromNode(id.Binary(), "secret-a", "worker event", false));
  // An unknown node's events are never adopted; only a registration sets a secret.
  EXPECT_FALSE(h.nodes.FromNode(NodeId::Random().Binary(), "x", "worker event", false));
}

TEST(NodeManagerTest, RefusesLabelsThatAreNotUtf8) {
  HeadHarness h;
  auto m = Registration(NodeId::Random(), "s");
  m.node.labels = {{"zone", std::string("\xff\xfe", 2)}};
  int i = -1;
  EXPECT_EQ(h.nodes.OnRegister(m, 0, &i), NodeManager::Registration::kRefused);
  EXPECT_EQ(h.nodes.size(), 0u);
  auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack);
  EXPECT_FALSE(ack->ok);
  EXPECT_EQ(ack->error_kind, proto::ErrorKind::kConfigError);
}

TEST(NodeManagerTest, SilentListsOnlyNodesPastTheLimitAndFreeAllResetsResources) {
  HeadHarness h;
  std::string a = h.AddNode({{"CPU", 4}}, {}, "s", 0);
  std::string b = h.AddNode({{"CPU", 4}}, {}, "s", 8);
  auto silent = h.nodes.Silent(10, 5);
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent[0].first, h.nodes.Index(a));
  EXPECT_NE(silent[0].second.find("no heartbeat for 10 s"), std::string::npos);
  int i = h.nodes.Index(a);
  h.nodes.available(i)["CPU"] = 1;
  h.nodes.MarkDead(i, "test");
  h.nodes.FreeAll(i);
  EXPECT_FALSE(h.nodes.alive(i));
  EXPECT_EQ(h.Available(a, "CPU"), 4);
  EXPECT_NE(h.Table("nodes")[NodeId(UniqueId::FromBinary(a)).Hex()].find("false"),
            std::string::npos);
  EXPECT_TRUE(h.nodes.Silent(10, 5).empty());  // dead nodes are not silent
}

TEST(NodeManagerTest, ANodeDeclaredDeadRejoinsWithItsNextHeartbeat) {
  HeadHarness h;
  NodeId id = NodeId::Random();
  auto m = Registration(id, "secret-a");
  int i = -1;
  ASSERT_EQ(h.nodes.OnRegister(m, 0, &i), NodeManager::Registration::kJoined);
  h.nodes.MarkDead(i, "no heartbeat for 1 s");
  h.nodes.FreeAll(i);
  EXPECT_EQ(h.nodes.OnRegister(m, 2, &i), NodeManager::Registration::kJoined);
  EXPECT_TRUE(h.nodes.alive(i));
  EXPECT_EQ(h.nodes.at(i).last_seen, 2);
}

TEST(NodeManagerTest, RestoreRebuildsTheRegistryAndSkipsMisfiledRecords) {
  auto store = std::make_shared<InMemoryStateStore>();
  std::string a;
  {
    HeadHarness first(store);
    a = first.AddNode({{"CPU", 2}}, {{"zone", "a"}});
  }
  std::string hex = NodeId(UniqueId::FromBinary(a)).Hex();
  store->Put("nodes", std::string(32, 'f'), store->GetAll("nodes").value()[hex]);  // misfiled copy
  store->Put("nodes", "not-json", "{");
  HeadHarness second(store);
  second.nodes.Restore(second.Table("nodes"), 100);
  ASSERT_EQ(second.nodes.size(), 1u);
  EXPECT_EQ(second.nodes.IndexOfHex(hex), 0);
  EXPECT_EQ(second.nodes.IndexOfHex(std::string(32, 'f')), -1);
  EXPECT_EQ(second.nodes.IndexOfHex("zz"), -1);
  EXPECT_EQ(second.nodes.at(0).last_seen, 100);  // a full grace period
  EXPECT_EQ(second.nodes.at(0).view.labels.at("zone"), "a");
}

TEST(NodeManagerTest, InfoListsEveryNodeWithItsAddressAndMemory) {
  HeadHarness h;
  auto m = Registration(NodeId::Random(), "s");
  m.node.memory_total_bytes = 1000;
  m.node.memory_used_bytes = 5000;  // clamped to the total
  int i = -1;
  h.nodes.OnRegister(m, 0, &i);
  auto info = h.nodes.Info(42);
  EXPECT_EQ(info.request_id, 42u);
  ASSERT_EQ(info.nodes.size(), 1u);
  EXPECT_EQ(info.nodes[0].address, "tcp://127.0.0.1:1");
  EXPECT_EQ(info.nodes[0].memory_used_bytes, 1000);
}

}  // namespace
}  // namespace orrery::scheduler
