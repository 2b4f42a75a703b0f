// ActorSubmitter: an actor's calls go out in submission order, numbered per incarnation,
// only while the actor is alive; a call waiting for an argument holds back the calls behind
// it; calls in flight when an incarnation dies are resent (while retries are left) to the
// next one, in their order; a dead actor fails what is queued and what comes later. The
// head's updates are delivered by hand; no sockets, no threads.
#include "actors/src/actor_submitter.h"

#include <chrono>
#include <future>
#include <thread>

#include "core/internal/clock.h"
#include "tests/unit/actors/submitter_fixture.h"

namespace orrery::runtime {
namespace {

using proto::ActorState;
using proto::MsgType;

class ActorSubmitterTest : public testing::SubmitterFixture {
 protected:
  ActorSubmitterTest() : actors_(self_, outbox_, head_, store_, resolver_) {}

  void Update(ActorState state, int incarnation, const std::string& address = "",
              const std::string& kind = "", const std::string& cause = "") {
    proto::ActorUpdateMsg u;
    u.actor_id = actor_.Binary();
    u.state = int(state);
    u.incarnation = incarnation;
    u.address = address;
    u.death_kind = proto::ErrorKindFromName(kind);
    u.death_cause = cause;
    actors_.OnUpdate(u);
  }
  // The calls sent so far: (address, function, seq).
  std::vector<std::tuple<std::string, std::string, uint64_t>> Calls() {
    std::vector<std::tuple<std::string, std::string, uint64_t>> out;
    for (const auto& m : outbox_.Sent(MsgType::kCall)) {
      auto c = m.As<proto::CallMsg>();
      EXPECT_EQ(c.actor_id, actor_.Binary());
      EXPECT_EQ(c.reply_to, self_.address);
      out.emplace_back(m.address, c.function, c.seq);
    }
    return out;
  }
  using Call = std::tuple<std::string, std::string, uint64_t>;

  ActorSubmitter actors_;
  ActorId actor_ = ActorId::Random();
};

TEST_F(ActorSubmitterTest, CallsWaitForTheActorThenGoInSubmissionOrder) {
  for (const char* f : {"a", "b", "c"}) actors_.Submit(actor_, NewCall(f, "x"));
  EXPECT_TRUE(Calls().empty());
  // The caller subscribed to the actor's updates, once.
  EXPECT_EQ(outbox_.Sent(MsgType::kSubscribeActor).size(), 1u);
  Update(ActorState::kAlive, 0, "tcp://a0");
  EXPECT_EQ(Calls(),
            (std::vector<Call>{{"tcp://a0", "a", 0}, {"tcp://a0", "b", 1}, {"tcp://a0", "c", 2}}));
}

TEST_F(ActorSubmitterTest, ACallWaitingForAnArgumentHoldsBackTheCallsBehindIt) {
  Update(ActorState::kAlive, 0, "tcp://a0");  // no state yet: ignored
  actors_.AddOwned(actor_, false, 0);
  Update(ActorState::kAlive, 0, "tcp://a0");
  auto first = NewCall("first");
  ObjectId dep = AddPendingRef(*first);
  actors_.Submit(actor_, first);
  actors_.Submit(actor_, NewCall("second", "x"));
  EXPECT_TRUE(Calls().empty());
  store_.PutValue(dep, std::make_shared<const std::string>("value"));
  EXPECT_EQ(Calls(), (std::vector<Call>{{"tcp://a0", "first", 0}, {"tcp://a0", "second", 1}}));
  auto sent = outbox_.Sent(MsgType::kCall);
  ASSERT_TRUE(sent[0].payload.has_value());
  EXPECT_NE(sent[0].payload->find("value"), std::string::npos);
}

TEST_F(ActorSubmitterTest, AFailedArgumentFailsItsCallOnly) {
  actors_.AddOwned(actor_, false, 0);
  Update(ActorState::kAlive, 0, "tcp://a0");
  auto first = NewCall("first");
  ObjectId dep = AddPendingRef(*first);
  actors_.Submit(actor_, first);
  auto second = NewCall("second", "x");
  actors_.Submit(actor_, second);
  store_.PutError(dep,
                  ObjectError{proto::ErrorKind::kRemoteError, "", "upstream failed", "up", ""});
  EXPECT_EQ(ErrorKind(*first), "RemoteError");
  EXPECT_EQ(Calls(), (std::vector<Call>{{"tcp://a0", "second", 0}}));
}

TEST_F(ActorSubmitterTest, ARestartResendsCallsInFlightInOrderWhileRetriesLast) {
  actors_.AddOwned(actor_, false, /*max_task_retries=*/1);
  Update(ActorState::kAlive, 0, "tcp://a0");
  auto a = NewCall("a", "x"), b = NewCall("b", "x"), c = NewCall("c", "x");
  for (auto& call : {a, b, c}) actors_.Submit(actor_, call);
  actors_.OnReply(actor_, 0);  // a answered
  outbox_.Clear();
  Update(ActorState::kRestarting, 0, "", "", "node lost");
  EXPECT_EQ(outbox_.Gone(), std::vector<std::string>{"tcp://a0"});
  Update(ActorState::kAlive, 1, "tcp://a1");
  EXPECT_EQ(Calls(), (std::vector<Call>{{"tcp://a1", "b", 0}, {"tcp://a1", "c", 1}}));
  // No retries left: the next death fails them.
  Update(ActorState::kRestarting, 1, "", "", "node lost again");
  EXPECT_EQ(ErrorKind(*b), "ActorDiedError");
  EXPECT_NE(ErrorMessage(*c).find("node lost again"), std::string::npos);
  EXPECT_EQ(ErrorKind(*a), "");
}

TEST_F(ActorSubmitterTest, AnOutOfMemoryDeathFailsWithItsKind) {
  actors_.AddOwned(actor_, false, 0);
  Update(ActorState::kAlive, 0, "tcp://a0");
  auto a = NewCall("a", "x");
  actors_.Submit(actor_, a);
  Update(ActorState::kRestarting, 0, "", "OutOfMemoryError", "memory above 95%");
  EXPECT_EQ(ErrorKind(*a), "OutOfMemoryError");
  EXPECT_NE(ErrorMessage(*a).find("memory above 95%"), std::string::npos);
}

TEST_F(ActorSubmitterTest, ADeadActorFailsQueuedAndLaterCalls) {
  auto queued = NewCall("queued", "x");
  actors_.Submit(actor_, queued);
  Update(ActorState::kDead, 0, "", "", "constructor threw");
  EXPECT_EQ(ErrorKind(*queued), "ActorDiedError");
  EXPECT_NE(ErrorMessage(*queued).find("constructor threw"), std::string::npos);
  auto later = NewCall("later", "x");
  actors_.Submit(actor_, later);
  EXPECT_EQ(ErrorKind(*later), "ActorDiedError");
  Update(ActorState::kAlive, 1, "tcp://a1");  // a dead actor stays dead
  EXPECT_TRUE(Calls().empty());
}

// A call that takes an earlier call's result to the same actor: when the actor dies, the
// first call fails under the actor's lock and the second one's argument callback takes that
// lock. It runs once the lock is released (a deadlock before). The work runs on a thread so
// that a deadlock fails the test at its deadline instead of hanging it.
TEST_F(ActorSubmitterTest, ACallOnAFailedResultOfTheSameActorFailsWithoutDeadlock) {
  Update(ActorState::kAlive, 0, "tcp://a0");
  auto first = NewCall("first", "x");
  actors_.Submit(actor_, first);
  auto second = NewCall("second");
  second->slots.push_back(internal::ArgSlot{
      "", std::make_shared<internal::RefHolder>(first->return_id, self_.address)});
  actors_.Submit(actor_, second);
  auto done = std::make_shared<std::promise<void>>();
  std::thread([this, done] {
    Update(ActorState::kDead, 0, "", "", "killed");
    done->set_value();
  }).detach();
  ASSERT_EQ(done->get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "failing the calls deadlocked";
  EXPECT_EQ(ErrorKind(*first), "ActorDiedError");
  EXPECT_EQ(ErrorKind(*second), "ActorDiedError");
}

TEST_F(ActorSubmitterTest, UpdatesOfAnOlderIncarnationAreIgnored) {
  actors_.AddOwned(actor_, false, 0);
  Update(ActorState::kAlive, 2, "tcp://a2");
  Update(ActorState::kDead, 1, "", "", "old news");
  auto call = NewCall("f", "x");
  actors_.Submit(actor_, call);
  EXPECT_EQ(Calls(), (std::vector<Call>{{"tcp://a2", "f", 0}}));
  EXPECT_EQ(ErrorKind(*call), "");
}

TEST_F(ActorSubmitterTest, KillWithRestartWaitsForTheNextIncarnation) {
  actors_.AddOwned(actor_, false, 0);
  Update(ActorState::kAlive, 0, "tcp://a0");
  actors_.Kill(actor_, /*no_restart=*/false);
  auto kill = outbox_.Sent(MsgType::kKillActor);
  ASSERT_EQ(kill.size(), 1u);
  EXPECT_FALSE(kill[0].As<proto::KillActorMsg>().no_restart);
  actors_.Submit(actor_, NewCall("f", "x"));
  Update(ActorState::kAlive, 0, "tcp://a0");  // the killed instance's late update
  EXPECT_TRUE(Calls().empty());
  Update(ActorState::kAlive, 1, "tcp://a1");
  EXPECT_EQ(Calls(), (std::vector<Call>{{"tcp://a1", "f", 0}}));
}

TEST_F(ActorSubmitterTest, KillOwnedKillsOnlyOwnedNonDetachedActors) {
  ActorId detached = ActorId::Random(), called = ActorId::Random();
  actors_.AddOwned(actor_, false, 0);
  actors_.AddOwned(detached, true, 0);
  actors_.Submit(called, NewCall("f", "x"));
  auto pending = NewCall("g", "x");
  actors_.Submit(actor_, pending);
  actors_.KillOwned();
  auto kills = outbox_.Sent(MsgType::kKillActor);
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].As<proto::KillActorMsg>().actor_id, actor_.Binary());
  EXPECT_TRUE(kills[0].As<proto::KillActorMsg>().no_restart);
  EXPECT_EQ(ErrorKind(*pending), "ActorDiedError");
}

TEST_F(ActorSubmitterTest, ARefusedCallKeepsItsPlaceAndItsNumber) {
  // A send the transport refuses (the queue to the actor is full) spends no sequence number:
  // the worker never waits for a number that was not sent.
  actors_.AddOwned(actor_, false, 0);
  Update(ActorState::kAlive, 0, "tcp://a0");
  bool full = true;
  outbox_.on_send = [&full](const ::orrery::testing::SentMessage& m) {
    if (m.type == MsgType::kCall && full) return Status::Unavailable("queue full");
    return Status::Ok();
  };
  auto first = NewCall("first", "x");
  auto second = NewCall("second", "x");
  actors_.Submit(actor_, first);
  actors_.Submit(actor_, second);  // waits behind the first
  EXPECT_EQ(Calls(), (std::vector<Call>{{"tcp://a0", "first", 0}, {"tcp://a0", "first", 0}}));
  EXPECT_EQ(ErrorKind(*first), "");
  outbox_.Clear();
  full = false;
  actors_.Tick(1);  // the runtime's tick tries again
  EXPECT_EQ(Calls(), (std::vector<Call>{{"tcp://a0", "first", 0}, {"tcp://a0", "second", 1}}));
  // A reply from the actor resumes a blocked queue as well.
  full = true;
  auto third = NewCall("third", "x");
  actors_.Submit(actor_, third);
  outbox_.Clear();
  full = false;
  actors_.OnReply(actor_, 0);
  EXPECT_EQ(Calls(), (std::vector<Call>{{"tcp://a0", "third", 2}}));
  EXPECT_EQ(outbox_.Sent(MsgType::kCall)[0].As<proto::CallMsg>().first_pending, 1u);
}

TEST_F(ActorSubmitterTest, ACallThatCanNeverBeSentFailsWithoutSpendingANumber) {
  actors_.AddOwned(actor_, false, 0);
  Update(ActorState::kAlive, 0, "tcp://a0");
  int sends = 0;
  outbox_.on_send = [&sends](const ::orrery::testing::SentMessage& m) {
    if (m.type == MsgType::kCall && ++sends == 1) return Status::InvalidArgument("bad address");
    return Status::Ok();
  };
  auto bad = NewCall("bad", "x");
  actors_.Submit(actor_, bad);
  actors_.Submit(actor_, NewCall("kept", "x"));
  EXPECT_EQ(ErrorKind(*bad), "ConnectionError");
  auto calls = Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1], (Call{"tcp://a0", "kept", 0}));
}

TEST_F(ActorSubmitterTest, SetMaxPendingCallsBoundsWhatIsPendingAtSubmission) {
  actors_.AddOwned(actor_, false, 0, /*max_pending_calls=*/2);
  Update(ActorState::kAlive, 0, "tcp://a0");
  actors_.CheckPending(actor_, 10);
  actors_.Submit(actor_, NewCall("a", "x"));
  actors_.CheckPending(actor_, 10);
  actors_.Submit(actor_, NewCall("b", "x"));
  EXPECT_THROW(actors_.CheckPending(actor_, 10), PendingCallsLimitExceededError);
  actors_.OnReply(actor_, 0);  // one answered: room for one more
  actors_.CheckPending(actor_, 10);
  // An actor with no limit (-1) takes any number.
  ActorId other = ActorId::Random();
  actors_.AddOwned(other, false, 0, -1);
  for (int i = 0; i < 100; ++i) actors_.Submit(other, NewCall("c", "x"));
  actors_.CheckPending(other, 10);
}

TEST_F(ActorSubmitterTest, TheDefaultBoundIsAMemoryBudget) {
  EXPECT_GE(ActorSubmitter::DefaultPendingBytes(), 64u << 20);
  EXPECT_LE(ActorSubmitter::DefaultPendingBytes(), 1u << 30);
  uint64_t budget = 4u << 20;
  actors_.set_default_pending_bytes(budget);
  actors_.AddOwned(actor_, false, 0);  // not alive yet: everything waits in the queue
  std::string big(budget / 4, 'x');
  for (int i = 0; i < 3; ++i) {
    actors_.CheckPending(actor_, big.size());
    actors_.Submit(actor_, NewCall("big", big));
  }
  try {
    actors_.CheckPending(actor_, big.size());
    FAIL() << "a fourth quarter of the budget was admitted";
  } catch (const PendingCallsLimitExceededError& e) {
    EXPECT_NE(std::string(e.what()).find("SetMaxPendingCalls"), std::string::npos) << e.what();
  }
  actors_.CheckPending(actor_, 100);  // a small one still fits
}

TEST_F(ActorSubmitterTest, CallsTheWorkerReportsLostFailWithConnectionError) {
  actors_.AddOwned(actor_, false, 0);
  Update(ActorState::kAlive, 0, "tcp://a0");
  std::vector<std::shared_ptr<PendingCall>> calls;
  for (int i = 0; i < 4; ++i) {
    calls.push_back(NewCall("m", "x"));
    actors_.Submit(actor_, calls.back());
  }
  // A report from another incarnation's worker changes nothing.
  actors_.OnCallsLost(proto::CallsLostMsg{actor_.Binary(), "tcp://old", 1, 3, "lost"});
  EXPECT_EQ(ErrorKind(*calls[1]), "");
  actors_.OnCallsLost(proto::CallsLostMsg{actor_.Binary(), "tcp://a0", 1, 3, "lost on the way"});
  EXPECT_EQ(ErrorKind(*calls[0]), "");
  EXPECT_EQ(ErrorKind(*calls[1]), "ConnectionError");
  EXPECT_EQ(ErrorKind(*calls[2]), "ConnectionError");
  EXPECT_EQ(ErrorKind(*calls[3]), "");
  EXPECT_NE(ErrorMessage(*calls[1]).find("lost on the way"), std::string::npos);
  // A hostile range touches only this process's own calls.
  actors_.OnCallsLost(proto::CallsLostMsg{actor_.Binary(), "tcp://a0", 0, UINT64_MAX, "x"});
  EXPECT_EQ(ErrorKind(*calls[3]), "ConnectionError");
}

// A caller of another's actor subscribes; if it hears nothing from the head (the message
// was lost with a head that stopped), the tick subscribes again, until an update comes.
TEST_F(ActorSubmitterTest, ASubscriptionNotAnsweredIsSentAgain) {
  actors_.Submit(actor_, NewCall("a", "x"));
  ASSERT_EQ(outbox_.Sent(MsgType::kSubscribeActor).size(), 1u);
  double now = MonotonicSeconds();
  actors_.Tick(now);
  EXPECT_EQ(outbox_.Sent(MsgType::kSubscribeActor).size(), 1u);
  actors_.Tick(now + ActorSubmitter::kResubscribeS + 0.1);
  auto sent = outbox_.Sent(MsgType::kSubscribeActor);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1].As<proto::SubscribeActorMsg>().actor_id, actor_.Binary());
  Update(ActorState::kPending, 0);
  actors_.Tick(now + 60);
  EXPECT_EQ(outbox_.Sent(MsgType::kSubscribeActor).size(), 2u);  // heard: never again

  // The owner is subscribed by the creation itself (HeadClient::CreateActor resends that).
  ActorId owned = ActorId::Random();
  actors_.AddOwned(owned, false, 0);
  actors_.Submit(owned, NewCall("b", "x"));
  actors_.Tick(now + 120);
  EXPECT_EQ(outbox_.Sent(MsgType::kSubscribeActor).size(), 2u);
}

TEST_F(ActorSubmitterTest, TheTickTellsTheWorkerHowFarCallsWereSent) {
  actors_.AddOwned(actor_, false, 0);
  Update(ActorState::kAlive, 0, "tcp://a0");
  actors_.Tick(100);
  EXPECT_TRUE(outbox_.Sent(MsgType::kCallsSent).empty());  // nothing unanswered
  actors_.Submit(actor_, NewCall("a", "x"));
  actors_.Submit(actor_, NewCall("b", "x"));
  actors_.Tick(101);
  auto sent = outbox_.Sent(MsgType::kCallsSent);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].address, "tcp://a0");
  auto m = sent[0].As<proto::CallsSentMsg>();
  EXPECT_EQ(m.end_seq, 2u);
  EXPECT_EQ(m.reply_to, self_.address);
  actors_.Tick(102);  // not again before kAnnounceS
  EXPECT_EQ(outbox_.Sent(MsgType::kCallsSent).size(), 1u);
  actors_.Tick(101 + ActorSubmitter::kAnnounceS);
  EXPECT_EQ(outbox_.Sent(MsgType::kCallsSent).size(), 2u);
}

}  // namespace
}  // namespace orrery::runtime
