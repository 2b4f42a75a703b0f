// NodeManager: registration, heartbeats, node secrets, health, records and their restore.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "scheduler/src/records.h"
#include "tests/unit/scheduler/head_harness.h"

namespace orrery::scheduler {
namespace {

using nlohmann::json;
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

TEST(NodeManagerTest, ASuspectedNodeTakesNoNewWorkAndFreeAllResetsResources) {
  HeadHarness h;
  std::string a = h.AddNode({{"CPU", 4}}, {}, "s", 0);
  int i = h.nodes.Index(a);
  h.nodes.SetSuspected(i, true);
  EXPECT_TRUE(h.nodes.list()[size_t(i)].suspected);
  EXPECT_TRUE(h.nodes.Info(0).nodes[0].suspected);
  Decision held = ScheduleHybridOn(Demand{{{"CPU", 1}}}, h.nodes.list());
  EXPECT_EQ(held.outcome, Outcome::kWait) << held.reason;  // not infeasible: it may recover
  h.nodes.SetSuspected(i, false);
  EXPECT_EQ(ScheduleHybridOn(Demand{{{"CPU", 1}}}, h.nodes.list()).outcome, Outcome::kPlaced);
  h.nodes.SetSuspected(i, true);
  h.nodes.available(i)["CPU"] = 1;
  h.nodes.MarkDead(i, "test");
  h.nodes.FreeAll(i);
  EXPECT_FALSE(h.nodes.alive(i));
  EXPECT_EQ(h.Available(a, "CPU"), 4);
  EXPECT_NE(h.Table("nodes")[NodeId(UniqueId::FromBinary(a)).Hex()].find("false"),
            std::string::npos);
  EXPECT_FALSE(h.nodes.list()[size_t(i)].suspected);  // dead, no longer suspected
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

TEST(NodeManagerTest, ARestartedHeadKnowsANodesSecretBeforeItsNextHeartbeat) {
  auto store = std::make_shared<InMemoryStateStore>();
  std::string a;
  {
    HeadHarness first(store);
    a = first.AddNode({{"CPU", 2}}, {}, "secret-a");
  }
  std::string record = store->GetAll("nodes").value().begin()->second;
  EXPECT_EQ(record.find("secret-a"), std::string::npos) << "only a hash is stored";
  HeadHarness second(store);
  second.nodes.Restore(second.Table("nodes"), 100);
  // A worker event right after the restart (no heartbeat yet) is the node's own.
  EXPECT_TRUE(second.nodes.FromNode(a, "secret-a", "worker event", false));
  EXPECT_FALSE(second.nodes.FromNode(a, "secret-b", "worker event", false));
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

proto::ObjectStoreUsageMsg Usage(uint64_t capacity, uint64_t used, uint64_t spilled,
                                 uint64_t objects) {
  return {capacity, used, spilled, objects};
}

// The node's record as stored, parsed; null when there is none.
json NodeRecord(HeadHarness& h, const NodeId& id) {
  auto table = h.Table("nodes");
  auto it = table.find(id.Hex());
  return it == table.end() ? json() : json::parse(it->second);
}

TEST(NodeManagerTest, InfoCarriesTheObjectStoreClampedAndItsPathAndTag) {
  HeadHarness h;
  NodeId id = NodeId::Random();
  auto m = Registration(id, "s");
  m.node.object_store = Usage(1000, 5000, 7, 3);  // used beyond the capacity: clamped
  m.node.object_store_path = "/dev/shm/orrery-arena-1";
  m.node.object_store_tag = "tag-1";
  int i = -1;
  ASSERT_EQ(h.nodes.OnRegister(m, 0, &i), NodeManager::Registration::kJoined);
  auto info = h.nodes.Info(1);
  ASSERT_EQ(info.nodes.size(), 1u);
  const auto& store = info.nodes[0].object_store;
  EXPECT_EQ(store.capacity_bytes, 1000u);
  EXPECT_EQ(store.used_bytes, 1000u);
  EXPECT_EQ(store.spilled_bytes, 7u);
  EXPECT_EQ(store.num_objects, 3u);
  EXPECT_EQ(info.nodes[0].object_store_path, "/dev/shm/orrery-arena-1");
  EXPECT_EQ(info.nodes[0].object_store_tag, "tag-1");
  json r = NodeRecord(h, id);
  EXPECT_EQ(r["object_store_capacity_bytes"], 1000);
  EXPECT_EQ(r["object_store_used_bytes"], 1000);
  EXPECT_EQ(r["object_store_spilled_bytes"], 7);
  EXPECT_EQ(r["object_store_num_objects"], 3);

  // Figures beyond any real store are clamped to the records' bounds.
  m.node.object_store = Usage(~0ull, ~0ull, ~0ull, ~0ull);
  h.nodes.OnRegister(m, 1, &i);
  const proto::ObjectStoreUsageMsg huge = h.nodes.Info(2).nodes[0].object_store;
  EXPECT_EQ(huge.capacity_bytes, records::kMaxObjectStoreBytes);
  EXPECT_EQ(huge.used_bytes, records::kMaxObjectStoreBytes);
  EXPECT_EQ(huge.spilled_bytes, records::kMaxObjectStoreBytes);
  EXPECT_EQ(huge.num_objects, records::kMaxObjectStoreObjects);
}

TEST(NodeManagerTest, AHeartbeatRewritesTheRecordOnlyWhenTheStoreMovedByOnePercent) {
  HeadHarness h;
  NodeId id = NodeId::Random();
  auto m = Registration(id, "s");
  m.node.object_store = Usage(10000, 1000, 0, 2);
  int i = -1;
  ASSERT_EQ(h.nodes.OnRegister(m, 0, &i), NodeManager::Registration::kJoined);
  // Whether heartbeat `usage` rewrote the record (deleted before it, so a rewrite shows).
  auto rewrites = [&](proto::ObjectStoreUsageMsg usage) {
    h.store->Delete("nodes", id.Hex());
    m.node.object_store = usage;
    EXPECT_EQ(h.nodes.OnRegister(m, 1, &i), NodeManager::Registration::kHeartbeat);
    return !NodeRecord(h, id).is_null();
  };
  EXPECT_FALSE(rewrites(Usage(10000, 1000, 0, 2)));  // unchanged
  EXPECT_FALSE(rewrites(Usage(10000, 1099, 0, 2)));  // moved by 0.99%
  EXPECT_TRUE(rewrites(Usage(10000, 1100, 0, 2)));   // by 1% of the capacity
  EXPECT_EQ(NodeRecord(h, id)["object_store_used_bytes"], 1100);
  EXPECT_FALSE(rewrites(Usage(10000, 1001, 0, 2)));   // 0.99% from what was written
  EXPECT_TRUE(rewrites(Usage(10000, 1001, 0, 3)));    // a new object
  EXPECT_TRUE(rewrites(Usage(10000, 1001, 100, 3)));  // spilled 1% of the capacity
  EXPECT_TRUE(rewrites(Usage(20000, 1001, 100, 3)));  // a new capacity
  EXPECT_EQ(h.nodes.Info(0).nodes[0].object_store.used_bytes, 1001u);
  // A node with no store and no memory reading is not rewritten by every heartbeat.
  m.node.memory_total_bytes = 0;
  EXPECT_TRUE(rewrites(Usage(0, 0, 0, 0)));
  EXPECT_FALSE(rewrites(Usage(0, 0, 0, 0)));
}

TEST(NodeManagerTest, RefusesAnObjectStorePathOrTagThatIsTooLongOrNotUtf8) {
  for (auto [path, tag] : std::vector<std::pair<std::string, std::string>>{
           {std::string(kMaxObjectStorePathBytes + 1, 'p'), "t"},
           {"/dev/shm/a", std::string(kMaxObjectStoreTagBytes + 1, 't')},
           {std::string("/dev/shm/\xff", 10), "t"},
           {"/dev/shm/a", std::string("\xc0\x80", 2)}}) {
    HeadHarness h;
    auto m = Registration(NodeId::Random(), "s");
    m.node.object_store_path = path;
    m.node.object_store_tag = tag;
    int i = -1;
    EXPECT_EQ(h.nodes.OnRegister(m, 0, &i), NodeManager::Registration::kRefused);
    EXPECT_EQ(h.nodes.size(), 0u);
    auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
    ASSERT_TRUE(ack);
    EXPECT_NE(ack->message.find("object store"), std::string::npos) << ack->message;
  }
  HeadHarness h;  // at the bounds: accepted
  auto m = Registration(NodeId::Random(), "s");
  m.node.object_store_path = std::string(kMaxObjectStorePathBytes, 'p');
  m.node.object_store_tag = std::string(kMaxObjectStoreTagBytes, 't');
  int i = -1;
  EXPECT_EQ(h.nodes.OnRegister(m, 0, &i), NodeManager::Registration::kJoined);
}

TEST(NodeManagerTest, RestoreKeepsTheStoreUsageAndTheFirstHeartbeatBringsThePath) {
  auto store = std::make_shared<InMemoryStateStore>();
  NodeId id = NodeId::Random();
  auto m = Registration(id, "s");
  m.node.object_store = Usage(4096, 2048, 512, 5);
  m.node.object_store_path = "/dev/shm/arena";
  m.node.object_store_tag = "t";
  int i = -1;
  {
    HeadHarness first(store);
    ASSERT_EQ(first.nodes.OnRegister(m, 0, &i), NodeManager::Registration::kJoined);
  }
  HeadHarness second(store);
  second.nodes.Restore(second.Table("nodes"), 100);
  auto info = second.nodes.Info(0);
  ASSERT_EQ(info.nodes.size(), 1u);
  EXPECT_EQ(info.nodes[0].object_store.capacity_bytes, 4096u);
  EXPECT_EQ(info.nodes[0].object_store.used_bytes, 2048u);
  EXPECT_EQ(info.nodes[0].object_store.spilled_bytes, 512u);
  EXPECT_EQ(info.nodes[0].object_store.num_objects, 5u);
  EXPECT_EQ(info.nodes[0].object_store_path, "");
  EXPECT_EQ(second.nodes.OnRegister(m, 101, &i), NodeManager::Registration::kHeartbeat);
  EXPECT_EQ(second.nodes.Info(0).nodes[0].object_store_path, "/dev/shm/arena");
  EXPECT_EQ(second.nodes.Info(0).nodes[0].object_store_tag, "t");
}

}  // namespace
}  // namespace orrery::scheduler
