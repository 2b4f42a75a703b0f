// HeadEvents: a node's worker events go to the head with a request id of their own (never 0,
// which answers a registration) and its inbox as reply_to, are sent again every kResendS
// until acknowledged, in the order they happened, and are given up after kGiveUpS.
#include "node/src/head_events.h"

#include <gtest/gtest.h>

#include "tests/fakes/recording_outbox.h"

namespace orrery::node {
namespace {

using proto::MsgType;
using testing::RecordingOutbox;

constexpr char kHead[] = "tcp://head";

proto::WorkerEventMsg Alive(const std::string& actor) {
  proto::WorkerEventMsg ev;
  ev.kind = int(proto::WorkerEventKind::kActorAlive);
  ev.actor_id = actor;
  return ev;
}

std::vector<proto::WorkerEventMsg> Sent(RecordingOutbox& outbox) {
  std::vector<proto::WorkerEventMsg> out;
  for (const auto& m : outbox.Sent(MsgType::kWorkerEvent)) {
    EXPECT_EQ(m.address, kHead);
    out.push_back(m.As<proto::WorkerEventMsg>());
  }
  return out;
}

TEST(HeadEventsTest, AnEventIsSentAgainUntilTheHeadAcknowledgesIt) {
  RecordingOutbox outbox;
  HeadEvents events(outbox, kHead);
  events.SetReplyTo("tcp://node");
  events.Send(Alive("a"), 100);
  events.Send(Alive("b"), 100);
  auto first = Sent(outbox);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_NE(first[0].request_id, 0u);
  EXPECT_NE(first[0].request_id, first[1].request_id);
  EXPECT_EQ(first[0].reply_to, "tcp://node");

  events.Resend(100 + HeadEvents::kResendS / 2);
  EXPECT_EQ(Sent(outbox).size(), 2u);  // not yet
  events.Resend(100 + HeadEvents::kResendS);
  auto again = Sent(outbox);
  ASSERT_EQ(again.size(), 4u);
  EXPECT_EQ(again[2].actor_id, "a");  // in the order they happened
  EXPECT_EQ(again[3].request_id, first[1].request_id);

  EXPECT_TRUE(events.OnAck(first[0].request_id));
  EXPECT_FALSE(events.OnAck(first[0].request_id));  // once
  EXPECT_FALSE(events.OnAck(0));                    // a registration's answer
  events.Resend(100 + 3 * HeadEvents::kResendS);
  again = Sent(outbox);
  ASSERT_EQ(again.size(), 5u);
  EXPECT_EQ(again[4].actor_id, "b");
  EXPECT_EQ(events.pending(), 1u);
}

TEST(HeadEventsTest, AnEventNeverAcknowledgedIsGivenUp) {
  RecordingOutbox outbox;
  HeadEvents events(outbox, kHead);
  events.Send(Alive("a"), 0);
  events.Resend(HeadEvents::kGiveUpS);
  EXPECT_EQ(events.pending(), 0u);
  EXPECT_EQ(Sent(outbox).size(), 1u);
}

}  // namespace
}  // namespace orrery::node
