// HeadClient: an RPC is resent until the head answers, under one request id; it gives up at
// its deadline (ConnectionError) and then ignores the late answer; a wrong answer type is an
// error. Answers are delivered from the fake outbox's send hook, on the calling thread.
#include "actors/src/head_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>

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

TEST_F(HeadClientTest, FireAndForgetMessagesGoToTheHead) {
  client_.SubscribeActor(ActorId::Random());
  client_.ReturnLease("lease", true);
  auto sent = outbox_.Sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].type, MsgType::kSubscribeActor);
  EXPECT_EQ(sent[0].As<proto::SubscribeActorMsg>().reply_to, "tcp://me");
  EXPECT_EQ(sent[1].address, kHead);
  EXPECT_TRUE(sent[1].As<proto::ReturnLeaseMsg>().worker_failed);
}

}  // namespace
}  // namespace orrery::runtime
