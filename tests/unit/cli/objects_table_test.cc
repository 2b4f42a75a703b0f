// `orrery list objects`: the table and JSON made of fabricated node replies, and
// QueryObjects against fake nodes (inboxes on loopback threads): one that answers, one that
// never does, one that answers with hostile content.
#include "cli/src/objects_table.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/src/list_objects.h"
#include "core/internal/protocol.h"
#include "core/internal/transport.h"

namespace orrery::cli {
namespace {

constexpr const char* kNodeA = "1a2b3c4d5e6f70819a2b3c4d5e6f7081";
constexpr const char* kNodeB = "99887766554433221100aabbccddeeff";

proto::ObjectInfoMsg Object(const std::string& id, uint64_t size, bool spilled, bool primary,
                            int pins) {
  return {id, size, "tcp://127.0.0.1:4000", spilled, primary, pins};
}

NodeObjects Answered(const char* node, std::vector<proto::ObjectInfoMsg> objects,
                     proto::ObjectStoreUsageMsg usage) {
  NodeObjects n;
  n.node_id = node;
  n.address = "tcp://127.0.0.1:5000";
  n.answered = true;
  n.reply.node_id = node;
  n.reply.usage = usage;
  n.reply.objects = std::move(objects);
  return n;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ObjectsTable, HumanBytesAndTheStoreLine) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(uint64_t(1.2 * (1ull << 30))), "1.2 GiB");
  EXPECT_EQ(HumanBytes(~0ull), "16.0 EiB");
  EXPECT_EQ(StoreUsage({7ull << 30, uint64_t(1.2 * (1ull << 30)), 0, 3}),
            "1.2 GiB / 7.0 GiB (3 objects, 0 B spilled)");
  EXPECT_EQ(StoreUsage({1024, 0, 2048, 1}), "0 B / 1.0 KiB (1 object, 2.0 KiB spilled)");
  EXPECT_EQ(StoreUsage({}), "no object store");
}

TEST(ObjectsTable, ListsEveryObjectWithItsNodeAndSaysWhoDidNotAnswer) {
  std::string id1 = "0123456789abcdef0123456789abcdef";
  std::string id2 = "fedcba9876543210fedcba9876543210";
  NodeObjects a =
      Answered(kNodeA, {Object(id1, 3 << 20, false, true, 2), Object(id2, 200, true, false, 0)},
               {8ull << 30, 3 << 20, 200, 2});
  NodeObjects b;
  b.node_id = kNodeB;
  b.address = "tcp://127.0.0.1:6000";
  b.error = "did not answer within 5 s";
  std::string text = FormatObjects({a, b});
  EXPECT_TRUE(Has(text,
                  "1a2b3c4d  tcp://127.0.0.1:5000  3.0 MiB / 8.0 GiB (2 objects, 200 B "
                  "spilled)"))
      << text;
  EXPECT_TRUE(Has(text, "99887766  tcp://127.0.0.1:6000  did not answer within 5 s")) << text;
  EXPECT_TRUE(Has(text,
                  "OBJECT            SIZE     NODE      OWNER                 SPILLED  "
                  "COPY     PINS"))
      << text;
  EXPECT_TRUE(Has(text,
                  "0123456789abcdef  3.0 MiB  1a2b3c4d  tcp://127.0.0.1:4000  no       "
                  "primary  2"))
      << text;
  EXPECT_TRUE(Has(text,
                  "fedcba9876543210  200 B    1a2b3c4d  tcp://127.0.0.1:4000  yes      "
                  "copy     0"))
      << text;
  EXPECT_FALSE(Has(text, "note:"));
  EXPECT_TRUE(Has(text, "2 objects listed from 1 of 2 nodes (1 did not answer)")) << text;
}

TEST(ObjectsTable, NoObjectsAndATruncatedReply) {
  NodeObjects empty = Answered(kNodeA, {}, {1 << 20, 0, 0, 0});
  std::string text = FormatObjects({empty});
  EXPECT_TRUE(Has(text, "(no objects)")) << text;
  EXPECT_TRUE(Has(text, "0 objects listed from 1 of 1 node\n")) << text;

  NodeObjects cut =
      Answered(kNodeB, {Object(std::string(32, 'a'), 1, false, true, 0)}, {1 << 20, 1, 0, 12000});
  cut.reply.truncated = true;
  text = FormatObjects({cut});
  EXPECT_TRUE(Has(text, "note: node 99887766 listed only 1 object of 12000")) << text;
}

TEST(ObjectsTable, HostileStringsAreEscapedAndCut) {
  NodeObjects n = Answered(
      kNodeA, {{std::string("\x1b[2J\xff", 5), 1, std::string(500, 'o') + "\n", false, true, -3}},
      {});
  std::string text = FormatObjects({n});
  EXPECT_FALSE(Has(text, "\x1b")) << text;
  EXPECT_TRUE(Has(text, "\\x1b[2J\\xff")) << text;
  EXPECT_FALSE(Has(text, std::string(49, 'o'))) << "an owner longer than 48 characters is cut";
  EXPECT_TRUE(Has(text, std::string(45, 'o') + "...")) << text;
  EXPECT_EQ(Printable("ab\ncd", 100), "ab\\x0acd");
  EXPECT_EQ(Printable("abcdefgh", 5), "ab...");
  // JSON keeps the data as sent; invalid UTF-8 is replaced when dumped, never thrown over.
  nlohmann::json j = ObjectsJson({n});
  EXPECT_EQ(j["nodes"][0]["objects"][0]["pins"], -3);
  EXPECT_NO_THROW(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
}

TEST(ObjectsTable, JsonCarriesEveryField) {
  NodeObjects a = Answered(kNodeA, {Object("ab", 7, true, false, 1)}, {100, 7, 7, 1});
  NodeObjects b;
  b.node_id = kNodeB;
  b.error = "did not answer within 5 s";
  nlohmann::json j = ObjectsJson({a, b});
  ASSERT_EQ(j["nodes"].size(), 2u);
  EXPECT_EQ(
      j["nodes"][0]["usage"],
      (nlohmann::json{
          {"capacity_bytes", 100}, {"used_bytes", 7}, {"spilled_bytes", 7}, {"num_objects", 1}}));
  EXPECT_EQ(j["nodes"][0]["objects"][0], (nlohmann::json{{"object_id", "ab"},
                                                         {"size", 7},
                                                         {"owner", "tcp://127.0.0.1:4000"},
                                                         {"spilled", true},
                                                         {"primary", false},
                                                         {"pins", 1}}));
  EXPECT_EQ(j["nodes"][1]["answered"], false);
  EXPECT_EQ(j["nodes"][1]["error"], "did not answer within 5 s");
}

// A node's inbox on a loopback thread: answers kListObjects with `reply` (its request id
// set), first once with a request id nobody asked for, or not at all when `answer` is false.
class FakeNode {
 public:
  FakeNode(bool answer, proto::ListObjectsReplyMsg reply) {
    EXPECT_TRUE(inbox_.Bind("127.0.0.1").ok());
    inbox_.Start([answer, reply](transport::Envelope& env) mutable {
      if (!answer || env.type != proto::MsgType::kListObjects) return;
      proto::ListObjectsMsg m;
      ASSERT_TRUE(env.Decode(&m).ok());
      reply.request_id = m.request_id + 1000;  // a stale or forged answer: ignored
      transport::Send(m.reply_to, proto::MsgType::kListObjectsReply, reply);
      reply.request_id = m.request_id;
      transport::Send(m.reply_to, proto::MsgType::kListObjectsReply, reply);
    });
  }
  ~FakeNode() { inbox_.Stop(); }
  NodeObjects Target(const char* id) const {
    NodeObjects n;
    n.node_id = id;
    n.address = inbox_.address();
    return n;
  }

 private:
  transport::Inbox inbox_;
};

TEST(QueryObjects, CollectsAnswersAndReportsNodesThatDoNotAnswer) {
  proto::ListObjectsReplyMsg reply;
  reply.node_id = kNodeA;
  reply.usage = {1 << 20, 300, 0, 1};
  reply.objects = {Object(std::string(32, 'c'), 300, false, true, 1)};
  FakeNode answering(true, reply);
  FakeNode silent(false, {});
  NodeObjects bad;
  bad.node_id = kNodeB;
  bad.address = "ipc:///tmp/not-a-node";
  auto got = QueryObjects({answering.Target(kNodeA), silent.Target(kNodeB), bad}, "127.0.0.1", 500);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(got[0].answered) << got[0].error;
  ASSERT_EQ(got[0].reply.objects.size(), 1u);
  EXPECT_EQ(got[0].reply.objects[0].size, 300u);
  EXPECT_EQ(got[0].reply.usage.num_objects, 1u);
  EXPECT_FALSE(got[1].answered);
  EXPECT_EQ(got[1].error, "did not answer within 0.5 s");
  EXPECT_FALSE(got[2].answered);
  EXPECT_TRUE(Has(got[2].error, "not asked")) << got[2].error;
}

TEST(QueryObjects, ALongerListIsCutAndMarkedTruncated) {
  proto::ListObjectsReplyMsg reply;
  reply.objects.assign(proto::kMaxListedObjects + 5, Object("ab", 1, false, true, 0));
  FakeNode node(true, reply);
  auto got = QueryObjects({node.Target(kNodeA)}, "127.0.0.1", 5000);
  ASSERT_TRUE(got[0].answered) << got[0].error;
  EXPECT_EQ(got[0].reply.objects.size(), proto::kMaxListedObjects);
  EXPECT_TRUE(got[0].reply.truncated);
}

}  // namespace
}  // namespace orrery::cli
