// HeadClient: an RPC is resent until the head answers, under one request id; it gives up at
// its deadline (ConnectionError) and then ignores the late answer; a wrong answer type is an
// error. Answers are delivered from the fake outbox's send hook, on the calling thread.
#include "actors/src/head_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>

#include "core/internal/clock.h"
#include "orrery/errors.h"
#include "tests/fakes/recording_outbox.h"

namespace orrery::runtime {
namespace {

using ::orrery::testing::MakeEnvelope;
using ::orrery::testing::RecordingOutbox;
using ::orrery::testing::SentMessage;
using proto::MsgType;

constexpr char kHead[] = "tcp://head";
constexpr int kFastResendMs = 2;

class HeadClientTest : public ::testing::Test {
 protected:
  HeadClientTest() : client_(outbox_, kHead, kFastResendMs) { client_.SetReplyTo("tcp://me"); }

  // The hook answers the n-th send (1-based) of a request with an AckMsg.
  void AnswerOnSend(int n, bool ok = true, MsgType reply_type = MsgType::kAck) {
    outbox_.on_send = [this, n, ok, reply_type](const SentMessage& m) {
      if (++sends_ < n) return Status::Unavailable("dropped");
      proto::AckMsg ack;
      ack.request_id = m.RequestId();
      ack.ok = ok;
      ack.message = ok ? "" : "refused";
      auto env = MakeEnvelope(reply_type, ack);
      EXPECT_TRUE(client_.Complete(env));
      return Status::Ok();
    };
  }

  RecordingOutbox outbox_;
  HeadClient client_;
  std::atomic<int> sends_{0};
};

TEST_F(HeadClientTest, AnAnsweredRequestIsSentOnceWithReplyTo) {
  AnswerOnSend(1);
  proto::JobMsg m;
  m.job_id = "job";
  EXPECT_TRUE(client_.RegisterJob(m).ok);
  auto sent = outbox_.Sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].address, kHead);
  EXPECT_EQ(sent[0].type, MsgType::kRegisterJob);
  EXPECT_EQ(sent[0].As<proto::JobMsg>().reply_to, "tcp://me");
  EXPECT_EQ(sent[0].As<proto::JobMsg>().job_id, "job");
}

TEST_F(HeadClientTest, ResendsUnderOneRequestIdUntilAnswered) {
  AnswerOnSend(4);
  EXPECT_TRUE(client_.RegisterJob(proto::JobMsg{}, 30000).ok);
  auto sent = outbox_.Sent(MsgType::kRegisterJob);
  ASSERT_EQ(sent.size(), 4u);
  std::set<uint64_t> ids;
  for (const auto& m : sent) ids.insert(m.As<proto::JobMsg>().request_id);
  EXPECT_EQ(ids.size(), 1u);
}

TEST_F(HeadClientTest, EachRequestHasItsOwnId) {
  AnswerOnSend(1);
  ASSERT_TRUE(client_.RegisterJob(proto::JobMsg{}).ok);
  ASSERT_TRUE(client_.RegisterJob(proto::JobMsg{}).ok);
  auto sent = outbox_.Sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_NE(sent[0].As<proto::JobMsg>().request_id, sent[1].As<proto::JobMsg>().request_id);
}

TEST_F(HeadClientTest, GivesUpAtTheDeadlineAndIgnoresTheLateAnswer) {
  outbox_.on_send = [](const SentMessage&) { return Status::Unavailable("peer is gone"); };
  try {
    client_.RegisterJob(proto::JobMsg{}, 20);
    FAIL() << "expected ConnectionError";
  } catch (const ConnectionError& e) {
    EXPECT_NE(std::string(e.what()).find("peer is gone"), std::string::npos) << e.what();
  }
  auto sent = outbox_.Sent();
  ASSERT_FALSE(sent.empty());
  proto::AckMsg late;
  late.request_id = sent.back().As<proto::JobMsg>().request_id;
  auto env = MakeEnvelope(MsgType::kAck, late);
  EXPECT_FALSE(client_.Complete(env));
}

TEST_F(HeadClientTest, AnAnswerNoRequestWaitsForIsDropped) {
  proto::AckMsg ack;
  ack.request_id = 12345;
  auto env = MakeEnvelope(MsgType::kAck, ack);
  EXPECT_FALSE(client_.Complete(env));
}

TEST_F(HeadClientTest, AnAnswerOfTheWrongTypeIsAnError) {
  AnswerOnSend(1, true, MsgType::kClusterInfoReply);
  EXPECT_THROW(client_.RegisterJob(proto::JobMsg{}), Error);
}

TEST_F(HeadClientTest, PutRecordReportsRefusalAndSilence) {
  AnswerOnSend(1, false);
  Status refused = client_.PutRecord(proto::RecordMsg{}, 1000);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  outbox_.on_send = nullptr;
  Status silent = client_.PutRecord(proto::RecordMsg{}, 20);
  EXPECT_EQ(silent.code(), StatusCode::kUnavailable);
}

TEST_F(HeadClientTest, PutBinaryCarriesTheExecutable) {
  AnswerOnSend(1);
  EXPECT_TRUE(client_.PutBinary(proto::BinaryMsg{}, "ELF bytes").ok);
  auto sent = outbox_.Sent(MsgType::kPutBinary);
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_TRUE(sent[0].payload.has_value());
  EXPECT_EQ(*sent[0].payload, "ELF bytes");
}

// An unnamed actor's creation is not waited for, but kept and sent again (same request id)
// until the head acknowledges it; a refusal reaches on_refused, once.
TEST_F(HeadClientTest, AnActorCreationIsSentAgainUntilAcknowledged) {
  std::vector<proto::AckMsg> refusals;
  auto create = [&](const std::string& factory) {
    proto::CreateActorMsg m;
    m.spec.factory = factory;
    client_.CreateActor(m, [&](const proto::AckMsg& ack) { refusals.push_back(ack); });
  };
  auto acknowledge = [&](uint64_t id, bool ok, MsgType type = MsgType::kAck) {
    proto::AckMsg ack;
    ack.request_id = id;
    ack.ok = ok;
    ack.error_kind = proto::ErrorKind::kConfigError;
    ack.message = "bad spec";
    auto env = MakeEnvelope(type, ack);
    return client_.Complete(env);
  };
  create("A");
  create("B");
  auto sent = outbox_.Sent(MsgType::kCreateActor);
  ASSERT_EQ(sent.size(), 2u);
  auto a = sent[0].As<proto::CreateActorMsg>(), b = sent[1].As<proto::CreateActorMsg>();
  EXPECT_EQ(a.reply_to, "tcp://me");
  EXPECT_NE(a.request_id, b.request_id);
  double later = MonotonicSeconds() + 1;
  client_.ResendUnacknowledged(later);
  ASSERT_EQ(outbox_.Sent(MsgType::kCreateActor).size(), 4u);
  EXPECT_EQ(outbox_.Sent(MsgType::kCreateActor)[2].As<proto::CreateActorMsg>().request_id,
            a.request_id);
  client_.ResendUnacknowledged(later);  // not again before resend_ms
  EXPECT_EQ(outbox_.Sent(MsgType::kCreateActor).size(), 4u);

  EXPECT_TRUE(acknowledge(a.request_id, true, MsgType::kClusterInfoReply));  // not its answer
  EXPECT_TRUE(acknowledge(a.request_id, true));
  EXPECT_FALSE(acknowledge(a.request_id, true));  // a second answer finds nothing
  EXPECT_TRUE(acknowledge(b.request_id, false));
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(refusals[0].error_kind, proto::ErrorKind::kConfigError);
  EXPECT_EQ(refusals[0].message, "bad spec");
  client_.ResendUnacknowledged(later + 10);
  EXPECT_EQ(outbox_.Sent(MsgType::kCreateActor).size(), 4u);  // both answered: no more
}

TEST_F(HeadClientTest, FireAndForgetMessagesGoToTheHead) {
  client_.SubscribeActor(ActorId::Random());
  client_.JobHeartbeat(proto::JobMsg{});
  auto sent = outbox_.Sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].type, MsgType::kSubscribeActor);
  EXPECT_EQ(sent[0].As<proto::SubscribeActorMsg>().reply_to, "tcp://me");
  EXPECT_EQ(sent[1].address, kHead);
  EXPECT_EQ(sent[1].type, MsgType::kRegisterJob);
}

// A kill, a group's removal and a lease's return are sent again until acknowledged too.
TEST_F(HeadClientTest, KillsRemovalsAndReturnsAreSentAgainUntilAcknowledged) {
  client_.KillActor(ActorId::Random(), true);
  client_.RemovePlacementGroup(PlacementGroupId::Random());
  client_.ReturnLease("lease", true);
  auto sent = outbox_.Sent();
  ASSERT_EQ(sent.size(), 3u);
  auto kill = sent[0].As<proto::KillActorMsg>();
  auto removal = sent[1].As<proto::PlacementGroupMsg>();
  auto back = sent[2].As<proto::ReturnLeaseMsg>();
  EXPECT_EQ(kill.reply_to, "tcp://me");
  EXPECT_EQ(removal.reply_to, "tcp://me");
  EXPECT_EQ(back.reply_to, "tcp://me");
  EXPECT_TRUE(back.worker_failed);
  auto ack = [&](uint64_t id) {
    auto env = MakeEnvelope(MsgType::kAck, proto::AckMsg{id, true, proto::ErrorKind::kNone, ""});
    EXPECT_TRUE(client_.Complete(env));
  };
  ack(kill.request_id);
  double later = MonotonicSeconds() + 1;
  client_.ResendUnacknowledged(later);
  auto again = outbox_.Sent();
  ASSERT_EQ(again.size(), 5u);
  EXPECT_EQ(again[3].type, MsgType::kRemovePlacementGroup);
  EXPECT_EQ(again[4].As<proto::ReturnLeaseMsg>().request_id, back.request_id);
  ack(removal.request_id);
  ack(back.request_id);
  client_.ResendUnacknowledged(later + 10);
  EXPECT_EQ(outbox_.Sent().size(), 5u);
}

// What the head never acknowledges is given up after kGiveUpS.
TEST_F(HeadClientTest, AnUnacknowledgedMessageIsGivenUpInTheEnd) {
  client_.ReturnLease("lease", false);
  double now = MonotonicSeconds();
  client_.ResendUnacknowledged(now + HeadClient::kGiveUpS + 1);
  EXPECT_EQ(outbox_.Sent().size(), 1u);
  client_.ResendUnacknowledged(now + HeadClient::kGiveUpS + 10);
  EXPECT_EQ(outbox_.Sent().size(), 1u);
}

}  // namespace
}  // namespace orrery::runtime
