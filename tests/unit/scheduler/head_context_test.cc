// HeadContext::AckWhenStored: an acknowledgement that waits for the state store.
#include "scheduler/src/head_context.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "core/internal/state_store.h"
#include "tests/fakes/recording_outbox.h"
#include "tests/unit/scheduler/head_harness.h"

namespace orrery::scheduler {
namespace {

using ::orrery::testing::RecordingOutbox;

using testing::SlowStore;

TEST(HeadContextTest, AnAckWaitsForTheStoreAndARequestSentAgainAddsNoSecondWait) {
  auto store = std::make_shared<SlowStore>();
  auto outbox = std::make_shared<RecordingOutbox>();
  HeadContext ctx{store, outbox};
  HeadContext copy = ctx;  // a manager's copy shares the waiting acknowledgements
  ctx.AckWhenStored("tcp://node", 5);
  copy.AckWhenStored("tcp://node", 5);  // sent again before it was stored
  ctx.AckWhenStored("tcp://node", 6);
  ctx.AckWhenStored("", 7);  // nowhere to answer
  EXPECT_EQ(outbox->Count(proto::MsgType::kAck), 0u) << "acknowledged before it was stored";
  EXPECT_EQ(store->waiting.size(), 2u);
  EXPECT_EQ(ctx.stored_acks->size(), 2u);
  store->Store();
  auto first = outbox->Take<proto::AckMsg>(proto::MsgType::kAck, "tcp://node");
  auto second = outbox->Take<proto::AckMsg>(proto::MsgType::kAck, "tcp://node");
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->request_id, 5u);
  EXPECT_TRUE(first->ok);
  EXPECT_EQ(second->request_id, 6u);
  EXPECT_EQ(outbox->Count(proto::MsgType::kAck), 0u);
  EXPECT_EQ(ctx.stored_acks->size(), 0u);
  // Once answered, a request sent again (the answer was lost) is answered again.
  ctx.AckWhenStored("tcp://node", 5);
  store->Store();
  EXPECT_EQ(outbox->Count(proto::MsgType::kAck), 1u);
}

// The head sends them from its inbox thread (HeadService sets the poster): the store's
// writer only posts them.
TEST(HeadContextTest, AnAckGoesOutThroughThePosterOnceOneIsSet) {
  auto store = std::make_shared<SlowStore>();
  auto outbox = std::make_shared<RecordingOutbox>();
  HeadContext ctx{store, outbox};
  std::vector<std::function<void()>> posted;
  ctx.stored_acks->SetPoster([&](std::function<void()> send) { posted.push_back(send); });
  ctx.AckWhenStored("tcp://driver", 1);
  store->Store();
  EXPECT_EQ(outbox->Count(proto::MsgType::kAck), 0u) << "sent from the store's thread";
  ASSERT_EQ(posted.size(), 1u);
  posted[0]();
  EXPECT_TRUE(outbox->Take<proto::AckMsg>(proto::MsgType::kAck, "tcp://driver"));
  ctx.stored_acks->SetPoster(nullptr);  // stopped: sent where it is learnt
  ctx.AckWhenStored("tcp://driver", 2);
  store->Store();
  EXPECT_EQ(outbox->Count(proto::MsgType::kAck), 1u);
}

}  // namespace
}  // namespace orrery::scheduler
