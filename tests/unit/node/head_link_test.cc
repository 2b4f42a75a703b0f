// HeadLink: the node's registration with the head. A refusal (Ack ok=false) is an error
// carrying the head's reason, never "registered"; a refused node sends nothing more.
#include "node/src/head_link.h"

#include <gtest/gtest.h>

#include "orrery/ids.h"
#include "tests/fakes/recording_outbox.h"

namespace orrery::node {
namespace {

using ::orrery::testing::RecordingOutbox;
using proto::MsgType;

proto::RegisterNodeMsg Registration() {
  proto::RegisterNodeMsg reg;
  reg.node.node_id = NodeId::Random().Binary();
  reg.node.alive = true;
  reg.reply_to = "tcp://node";
  return reg;
}

proto::AckMsg Refusal(const std::string& reason) {
  proto::AckMsg ack;
  ack.ok = false;
  ack.error_kind = proto::ErrorKind::kConfigError;
  ack.message = reason;
  return ack;
}

TEST(HeadLinkTest, AnAcceptedRegistrationRegisters) {
  RecordingOutbox outbox;
  HeadLink link(outbox, "tcp://head");
  link.Send(Registration());
  ASSERT_TRUE(outbox.Take<proto::RegisterNodeMsg>(MsgType::kRegisterNode, "tcp://head"));
  EXPECT_TRUE(link.OnAck(proto::AckMsg{}).ok());
  EXPECT_TRUE(link.WaitRegistered(0).ok());
  EXPECT_TRUE(link.TakeRegistered());
  EXPECT_FALSE(link.TakeRegistered());
}

TEST(HeadLinkTest, ARefusedRegistrationIsAnErrorWithTheHeadsReason) {
  RecordingOutbox outbox;
  HeadLink link(outbox, "tcp://head");
  link.Send(Registration());
  Status s = link.OnAck(Refusal("the node's label value is not UTF-8"));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  Status wait = link.WaitRegistered(10000);  // answered already: returns at once
  EXPECT_EQ(wait.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(wait.message().find("refused this node"), std::string::npos) << wait.message();
  EXPECT_NE(wait.message().find("not UTF-8"), std::string::npos) << wait.message();
  EXPECT_FALSE(link.TakeRegistered()) << "a refused node has no registration to end";
}

// A head of another protocol version: the transport fails the send with Incompatible (its
// refusal names both versions). The link is refused for good with that message, at once.
TEST(HeadLinkTest, AHeadOfAnotherProtocolVersionRefusesTheNodeWithBothVersions) {
  RecordingOutbox outbox;
  const std::string why =
      "the peer at tcp://head runs orrery 9.0.0 (protocol version 9) and refused this orrery";
  outbox.on_send = [&](const auto&) { return Status::Incompatible(why); };
  HeadLink link(outbox, "tcp://head");
  int resends = 0;
  link.Send(Registration());
  Status wait = link.WaitRegistered(10000, 1, [&] { ++resends; });
  EXPECT_EQ(wait.code(), StatusCode::kIncompatible);
  EXPECT_EQ(wait.message(), why);
  EXPECT_EQ(resends, 0) << "refused before the first resend";
  link.Send(Registration());
  EXPECT_EQ(outbox.Count(MsgType::kRegisterNode), 1u) << "a refused node sends nothing more";
}

// With no answer, the registration is sent again every resend_ms until the deadline.
TEST(HeadLinkTest, AnUnansweredRegistrationIsResentUntilTheDeadline) {
  RecordingOutbox outbox;
  HeadLink link(outbox, "tcp://head");
  int resends = 0;
  Status wait = link.WaitRegistered(200, 10, [&] { ++resends; });
  EXPECT_EQ(wait.code(), StatusCode::kUnavailable);
  EXPECT_GE(resends, 1);
  EXPECT_LE(resends, 20) << "each resend follows a wait of resend_ms";
}

TEST(HeadLinkTest, ANodeRefusedOnAHeartbeatStopsHeartbeating) {
  RecordingOutbox outbox;
  HeadLink link(outbox, "tcp://head");
  link.Send(Registration());
  ASSERT_TRUE(link.OnAck(proto::AckMsg{}).ok());
  link.Send(Registration());  // a heartbeat
  EXPECT_FALSE(link.OnAck(Refusal("the autoscaler removed this node")).ok());
  EXPECT_NE(link.refusal().message().find("autoscaler removed"), std::string::npos);
  EXPECT_EQ(outbox.Count(MsgType::kRegisterNode), 2u);
  link.Send(Registration());
  EXPECT_EQ(outbox.Count(MsgType::kRegisterNode), 2u) << "a refused node heartbeats on";
  // A late acceptance does not undo the refusal.
  EXPECT_FALSE(link.OnAck(proto::AckMsg{}).ok());
  EXPECT_FALSE(link.WaitRegistered(0).ok());
}

TEST(HeadLinkTest, NoAnswerIsUnavailable) {
  RecordingOutbox outbox;
  HeadLink link(outbox, "tcp://head");
  link.Send(Registration());
  EXPECT_EQ(link.WaitRegistered(1).code(), StatusCode::kUnavailable);
}

TEST(HeadLinkTest, ARefusalAfterStartIsReportedOnceToTheOwner) {
  RecordingOutbox outbox;
  std::vector<std::string> reported;
  HeadLink link(outbox, "tcp://head", [&](const Status& s) { reported.push_back(s.message()); });
  link.Send(Registration());
  ASSERT_TRUE(link.OnAck(proto::AckMsg{}).ok());
  link.Started();
  EXPECT_FALSE(link.OnAck(Refusal("the autoscaler removed this node")).ok());
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_NE(reported[0].find("the autoscaler removed this node"), std::string::npos);
  EXPECT_FALSE(link.OnAck(Refusal("again")).ok());
  EXPECT_EQ(reported.size(), 1u);
  EXPECT_NE(link.refusal().message().find("autoscaler"), std::string::npos)
      << "the first reason is kept";
}

TEST(HeadLinkTest, ARefusalBeforeStartIsStartsErrorNotTheOwners) {
  RecordingOutbox outbox;
  int reported = 0;
  HeadLink link(outbox, "tcp://head", [&](const Status&) { ++reported; });
  link.Send(Registration());
  EXPECT_FALSE(link.OnAck(Refusal("a label value is not UTF-8")).ok());
  EXPECT_EQ(reported, 0);
  EXPECT_EQ(link.WaitRegistered(0).code(), StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace orrery::node
