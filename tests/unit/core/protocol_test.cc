// Wire frames (core/internal/protocol.h): well-formed frames decode to what was encoded, and
// every kind of malformed input becomes a non-OK Status: never a crash, never a throw.
#include "core/internal/protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "orrery/version.h"

namespace orrery::proto {
namespace {

using ::testing::HasSubstr;

std::string HeaderBytes(uint8_t m0, uint8_t m1, uint8_t version, uint8_t type) {
  return std::string{char(m0), char(m1), char(version), char(type)};
}

CallMsg SampleCall() {
  CallMsg call;
  call.request_id = 0x1234567890abcdefULL;
  call.object_id = std::string(16, '\x07');
  call.reply_to = "tcp://127.0.0.1:5555";
  call.actor_id = std::string("\0\1\2\3\4\5\6\7\x8\x9\xa\xb\xc\xd\xe\xf", 16);
  call.seq = 42;
  call.function = "Counter::Inc";
  call.lease_id = "lease-1";
  return call;
}

const std::vector<MsgType>& AllTypes() {
  static const std::vector<MsgType> types{
      MsgType::kError,
      MsgType::kCall,
      MsgType::kCallReply,
      MsgType::kGetObject,
      MsgType::kObjectReply,
      MsgType::kBorrow,
      MsgType::kCancel,
      MsgType::kCallsLost,
      MsgType::kCallsSent,
      MsgType::kStreamItem,
      MsgType::kStreamAck,
      MsgType::kObjectCreate,
      MsgType::kObjectSeal,
      MsgType::kObjectOpen,
      MsgType::kObjectRelease,
      MsgType::kObjectFree,
      MsgType::kObjectStoreReply,
      MsgType::kObjectCopied,
      MsgType::kListObjects,
      MsgType::kListObjectsReply,
      MsgType::kCreateActor,
      MsgType::kCreateActorReply,
      MsgType::kSubscribeActor,
      MsgType::kActorUpdate,
      MsgType::kGetNamedActor,
      MsgType::kGetNamedActorReply,
      MsgType::kKillActor,
      MsgType::kRequestLease,
      MsgType::kLeaseReply,
      MsgType::kReturnLease,
      MsgType::kCreatePlacementGroup,
      MsgType::kPlacementGroupReply,
      MsgType::kRemovePlacementGroup,
      MsgType::kWaitPlacementGroup,
      MsgType::kGetClusterInfo,
      MsgType::kClusterInfoReply,
      MsgType::kAck,
      MsgType::kRegisterJob,
      MsgType::kPutBinary,
      MsgType::kFetchBinary,
      MsgType::kBinaryReply,
      MsgType::kPutRecord,
      MsgType::kRegisterNode,
      MsgType::kStartActor,
      MsgType::kGrantLease,
      MsgType::kKillWorker,
      MsgType::kWorkerEvent,
      MsgType::kReleaseLease,
      MsgType::kWorkerRegister,
      MsgType::kAssign,
      MsgType::kAssignReply,
      MsgType::kExit,
      MsgType::kWorkerStats,
      MsgType::kPing,
      MsgType::kPong,
      MsgType::kSubmitJob,
      MsgType::kSubmitJobReply,
      MsgType::kStartJob,
      MsgType::kJobEvent,
      MsgType::kStopJob,
      MsgType::kLogBatch,
      MsgType::kListWorkers,
      MsgType::kListWorkersReply,
      MsgType::kListTasks,
      MsgType::kListTasksReply,
      MsgType::kAutoscalerSync,
      MsgType::kAutoscalerState,
  };
  return types;
}

TEST(ProtocolTest, EncodedFrameDecodesToTheSameMessage) {
  CallMsg call = SampleCall();
  std::string frame = EncodeFrame(MsgType::kCall, call);
  ASSERT_GE(frame.size(), kHeaderSize);
  EXPECT_EQ(uint8_t(frame[0]), kMagic0);
  EXPECT_EQ(uint8_t(frame[1]), kMagic1);
  EXPECT_EQ(uint8_t(frame[2]), kProtocolVersion);

  Result<Header> header = DecodeHeader(frame.data(), frame.size());
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->type, MsgType::kCall);

  CallMsg decoded;
  Status s = DecodeMeta(header->meta, &decoded);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(decoded.request_id, call.request_id);
  EXPECT_EQ(decoded.object_id, call.object_id);
  EXPECT_EQ(decoded.reply_to, call.reply_to);
  EXPECT_EQ(decoded.actor_id, call.actor_id);
  EXPECT_EQ(decoded.seq, call.seq);
  EXPECT_EQ(decoded.function, call.function);
  EXPECT_EQ(decoded.lease_id, call.lease_id);
}

TEST(ProtocolTest, NestedMessagesRoundTrip) {
  CreateActorMsg msg;
  msg.request_id = 9;
  msg.reply_to = "inproc://driver";
  msg.spec.actor_id = std::string(16, 'a');
  msg.spec.factory = "Counter::Create";
  msg.spec.args = internal::Pack(std::make_tuple(5));
  msg.spec.options.resources = {{"CPU", 1}, {"TPU", 4}};
  msg.spec.options.label_selector = {{"orrery.io/accelerator-type", "TPU-V4"}};
  msg.spec.options.name = "counter";
  msg.spec.options.max_concurrency = 3;
  msg.spec.options.bundle_index = 1;
  msg.spec.infeasible_timeout_s = 0.5;

  std::string frame = EncodeFrame(MsgType::kCreateActor, msg);
  Result<Header> header = DecodeHeader(frame.data(), frame.size());
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->type, MsgType::kCreateActor);
  CreateActorMsg decoded;
  ASSERT_TRUE(DecodeMeta(header->meta, &decoded).ok());
  EXPECT_EQ(decoded.request_id, 9u);
  EXPECT_EQ(decoded.spec.factory, "Counter::Create");
  EXPECT_EQ(decoded.spec.args, msg.spec.args);
  EXPECT_EQ(decoded.spec.options.resources, msg.spec.options.resources);
  EXPECT_EQ(decoded.spec.options.label_selector, msg.spec.options.label_selector);
  EXPECT_EQ(decoded.spec.options.name, "counter");
  EXPECT_EQ(decoded.spec.options.max_concurrency, 3);
  EXPECT_EQ(decoded.spec.options.bundle_index, 1);
  EXPECT_DOUBLE_EQ(decoded.spec.infeasible_timeout_s, 0.5);

  ClusterInfoMsg info;
  info.request_id = 3;
  NodeInfoMsg node;
  node.node_id = std::string(16, 'n');
  node.total = {{"CPU", 8}};
  node.available = {{"CPU", 6.5}};
  node.labels = {{"k", "v"}};
  info.nodes = {node, node};
  frame = EncodeFrame(MsgType::kClusterInfoReply, info);
  header = DecodeHeader(frame.data(), frame.size());
  ASSERT_TRUE(header.ok());
  ClusterInfoMsg info2;
  ASSERT_TRUE(DecodeMeta(header->meta, &info2).ok());
  ASSERT_EQ(info2.nodes.size(), 2u);
  EXPECT_EQ(info2.nodes[1].available, node.available);
  EXPECT_EQ(info2.nodes[1].labels, node.labels);
}

TEST(ProtocolTest, EveryDeclaredTypeIsKnownAndNamed) {
  for (MsgType t : AllTypes()) {
    EXPECT_TRUE(IsKnownType(uint8_t(t))) << int(t);
    ASSERT_NE(TypeName(t), nullptr);
    EXPECT_STRNE(TypeName(t), "") << int(t);
    std::string frame = EncodeFrame(t, PingMsg{});
    Result<Header> header = DecodeHeader(frame.data(), frame.size());
    ASSERT_TRUE(header.ok()) << int(t) << ": " << header.status().ToString();
    EXPECT_EQ(header->type, t);
  }
}

TEST(ProtocolTest, UndeclaredTypesAreUnknown) {
  std::vector<bool> declared(256, false);
  for (MsgType t : AllTypes()) declared[uint8_t(t)] = true;
  for (int v = 0; v < 256; ++v) {
    if (!declared[v]) {
      EXPECT_FALSE(IsKnownType(uint8_t(v))) << v;
    }
  }
}

TEST(ProtocolTest, EmptyInputIsRejected) {
  EXPECT_FALSE(DecodeHeader(nullptr, 0).ok());
  std::string empty;
  EXPECT_FALSE(DecodeHeader(empty.data(), 0).ok());
}

TEST(ProtocolTest, ShortHeaderIsRejected) {
  std::string full = EncodeFrame(MsgType::kPing, PingMsg{});
  for (size_t n = 1; n < kHeaderSize; ++n) {
    Result<Header> r = DecodeHeader(full.data(), n);
    EXPECT_FALSE(r.ok()) << "size " << n;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(ProtocolTest, WrongMagicIsRejected) {
  std::string meta = internal::Pack(PingMsg{});
  for (auto h : {HeaderBytes('X', 'R', kProtocolVersion, uint8_t(MsgType::kPing)),
                 HeaderBytes('O', 'X', kProtocolVersion, uint8_t(MsgType::kPing)),
                 HeaderBytes('R', 'O', kProtocolVersion, uint8_t(MsgType::kPing)),
                 HeaderBytes(0, 0, 0, 0)}) {
    std::string frame = h + meta;
    EXPECT_FALSE(DecodeHeader(frame.data(), frame.size()).ok());
  }
}

TEST(ProtocolTest, WrongVersionIsRejectedAndNamed) {
  std::string frame = HeaderBytes(kMagic0, kMagic1, kProtocolVersion + 1, uint8_t(MsgType::kPing)) +
                      internal::Pack(PingMsg{});
  Result<Header> r = DecodeHeader(frame.data(), frame.size());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIncompatible);
  // Both versions: the peer's, and this one's with the project version.
  EXPECT_THAT(r.status().message(),
              HasSubstr("protocol version " + std::to_string(kProtocolVersion + 1)));
  EXPECT_THAT(r.status().message(), HasSubstr(orrery::VersionLine()));
  frame[2] = 0;
  EXPECT_EQ(DecodeHeader(frame.data(), frame.size()).status().code(), StatusCode::kIncompatible);
}

TEST(ProtocolTest, VersionRefusalRoundTripsAndNamesBothVersions) {
  std::string refusal = EncodeVersionRefusal();
  ASSERT_EQ(refusal.substr(0, 4),
            HeaderBytes(kMagic0, kMagic1, kProtocolVersion, kVersionRefusalType));
  EXPECT_EQ(refusal.substr(4), orrery::Version());
  // As a peer of version 9 running orrery 9.0.0 would send it.
  std::string theirs = HeaderBytes(kMagic0, kMagic1, 9, kVersionRefusalType) + "9.0.0";
  std::optional<Status> s = DecodeVersionRefusal(theirs.data(), theirs.size(), "the head at X");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->code(), StatusCode::kIncompatible);
  EXPECT_THAT(s->message(), HasSubstr("the head at X runs orrery 9.0.0 (protocol version 9)"));
  EXPECT_THAT(s->message(), HasSubstr(orrery::VersionLine()));
  // The refusal type is no message type of any version: DecodeHeader never takes it.
  EXPECT_FALSE(IsKnownType(kVersionRefusalType));
}

TEST(ProtocolTest, VersionRefusalFromAHostilePeerIsBoundedAndPrintable) {
  std::string control = HeaderBytes(kMagic0, kMagic1, 4, kVersionRefusalType) + "1\n\x1b[2J\xff";
  std::optional<Status> s = DecodeVersionRefusal(control.data(), control.size(), "p");
  ASSERT_TRUE(s.has_value());
  EXPECT_THAT(s->message(), HasSubstr("orrery 1??[2J? (protocol version 4)"));
  std::string too_long =
      HeaderBytes(kMagic0, kMagic1, 4, kVersionRefusalType) + std::string(kMaxRefusalText + 1, 'v');
  EXPECT_FALSE(DecodeVersionRefusal(too_long.data(), too_long.size(), "p").has_value());
  std::string other = HeaderBytes(kMagic0, kMagic1, 4, uint8_t(MsgType::kPing));
  EXPECT_FALSE(DecodeVersionRefusal(other.data(), other.size(), "p").has_value());
  EXPECT_FALSE(DecodeVersionRefusal(other.data(), 3, "p").has_value());
}

TEST(ProtocolTest, UnknownTypeIsRejected) {
  for (uint8_t type : {uint8_t(0), uint8_t(2), uint8_t(99), uint8_t(255)}) {
    std::string frame =
        HeaderBytes(kMagic0, kMagic1, kProtocolVersion, type) + internal::Pack(PingMsg{});
    EXPECT_FALSE(DecodeHeader(frame.data(), frame.size()).ok()) << int(type);
  }
}

TEST(ProtocolTest, GarbageMetaIsInvalidArgument) {
  CallMsg out;
  const std::vector<std::string> garbage{
      std::string(),                           // no body at all
      std::string("\xc1", 1),                  // a byte msgpack never uses
      std::string("\xdd\xff\xff\xff\xff", 5),  // array32 claiming 4 billion elements, no data
      std::string("\x95\x01", 2),              // array of 5 with 1 element present
      std::string("\xdb\x00\x00\x01\x00", 5),  // str32 of 256 bytes, truncated
  };
  for (const auto& meta : garbage) {
    Status s = Status::Ok();
    EXPECT_NO_THROW(s = DecodeMeta(meta, &out));
    EXPECT_FALSE(s.ok()) << "meta of " << meta.size() << " bytes";
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  }
}

TEST(ProtocolTest, WrongMetaShapeIsInvalidArgument) {
  CallMsg out;
  // Not an array at all.
  EXPECT_FALSE(DecodeMeta(internal::Pack(std::string("hello")), &out).ok());
  EXPECT_FALSE(DecodeMeta(internal::Pack(7), &out).ok());
  EXPECT_FALSE(DecodeMeta(internal::PackNil(), &out).ok());
  // An array whose fields have the wrong types: request_id should be an integer.
  EXPECT_FALSE(DecodeMeta(internal::Pack(std::make_tuple(std::string("id"), 1, 2)), &out).ok());
  // A map where an array is expected.
  EXPECT_FALSE(
      DecodeMeta(internal::Pack(std::map<std::string, int>{{"request_id", 1}}), &out).ok());
  // The right shape for one message decoded as another with different field types.
  CreateActorMsg create;
  EXPECT_FALSE(DecodeMeta(internal::Pack(SampleCall()), &create).ok());
}

TEST(ProtocolTest, RandomBytesNeverThrow) {
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> len(0, 64);
  int accepted_headers = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes(len(rng), '\0');
    for (char& c : bytes) c = char(byte(rng));
    if (i % 2 == 0 && bytes.size() >= kHeaderSize) {  // half of them with a valid header
      bytes[0] = char(kMagic0);
      bytes[1] = char(kMagic1);
      bytes[2] = char(kProtocolVersion);
      bytes[3] = char(MsgType::kCall);
    }
    EXPECT_NO_THROW({
      Result<Header> h = DecodeHeader(bytes.data(), bytes.size());
      if (h.ok()) {
        ++accepted_headers;
        CallMsg call;
        (void)DecodeMeta(h->meta, &call);
        ActorSpecMsg spec;
        (void)DecodeMeta(h->meta, &spec);
      }
    });
  }
  EXPECT_GT(accepted_headers, 0);
}

TEST(ProtocolTest, MutatedValidFramesNeverThrow) {
  std::string good = EncodeFrame(MsgType::kCall, SampleCall());
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = good;
    int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = char(rng() % 256);
    if (rng() % 3 == 0) bytes.resize(rng() % bytes.size());
    EXPECT_NO_THROW({
      Result<Header> h = DecodeHeader(bytes.data(), bytes.size());
      if (h.ok()) {
        CallMsg call;
        (void)DecodeMeta(h->meta, &call);
      }
    });
  }
}

// The node's memory fields and a lease's max_retries were added at the end of their
// messages: what an older peer sends (without them) still decodes, to defaults.
struct OldNodeInfoMsg {
  std::string node_id, address;
  bool alive = true;
  std::map<std::string, double> total, available;
  std::map<std::string, std::string> labels;
  MSGPACK_DEFINE(node_id, address, alive, total, available, labels);
};

TEST(ProtocolTest, MessagesFromOlderPeersDecodeWithoutTheNewFields) {
  OldNodeInfoMsg old{std::string(16, 'n'), "tcp://127.0.0.1:1", true,
                     {{"CPU", 2}},         {{"CPU", 1}},        {{"k", "v"}}};
  std::string frame = EncodeFrame(MsgType::kRegisterNode, old);
  auto h = DecodeHeader(frame.data(), frame.size());
  ASSERT_TRUE(h.ok());
  NodeInfoMsg got;
  got.memory_used_bytes = 5;
  ASSERT_TRUE(DecodeMeta(h->meta, &got).ok());
  EXPECT_EQ(got.address, "tcp://127.0.0.1:1");
  EXPECT_EQ(got.labels.at("k"), "v");
  EXPECT_EQ(got.memory_used_bytes, 5) << "a field the sender did not send keeps its default";
  EXPECT_EQ(got.memory_total_bytes, 0);

  NodeInfoMsg now = got;
  now.memory_used_bytes = 3ll << 30;
  now.memory_total_bytes = 16ll << 30;
  now.memory_usage_threshold = 0.95;
  std::string f2 = EncodeFrame(MsgType::kRegisterNode, now);
  auto h2 = DecodeHeader(f2.data(), f2.size());
  ASSERT_TRUE(h2.ok());
  NodeInfoMsg back;
  ASSERT_TRUE(DecodeMeta(h2->meta, &back).ok());
  EXPECT_EQ(back.memory_used_bytes, 3ll << 30);
  EXPECT_EQ(back.memory_total_bytes, 16ll << 30);
  EXPECT_DOUBLE_EQ(back.memory_usage_threshold, 0.95);
  OldNodeInfoMsg old_reader;  // and an older reader ignores them
  EXPECT_TRUE(DecodeMeta(h2->meta, &old_reader).ok());

  LeaseRequestMsg lease;
  lease.max_retries = 3;
  std::string f3 = EncodeFrame(MsgType::kRequestLease, lease);
  auto h3 = DecodeHeader(f3.data(), f3.size());
  ASSERT_TRUE(h3.ok());
  LeaseRequestMsg lease_back;
  ASSERT_TRUE(DecodeMeta(h3->meta, &lease_back).ok());
  EXPECT_EQ(lease_back.max_retries, 3);
}

}  // namespace
}  // namespace orrery::proto
