// ActorSubmitter: an actor's calls go out in submission order, numbered per incarnation,
// only while the actor is alive; a call waiting for an argument holds back the calls behind
// it; calls in flight when an incarnation dies are resent (while retries are left) to the
// next one, in their order; a dead actor fails what is queued and what comes later. The
// head's updates are delivered by hand; no sockets, no threads.
#include "actors/src/actor_submitter.h"

#include <chrono>
#include <future>
#include <thread>

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

TEST_F(ActorSubmitterTest, AnUnsentCallFailsAndTheNextStillGoes) {
  actors_.AddOwned(actor_, false, 0);
  Update(ActorState::kAlive, 0, "tcp://a0");
  int sends = 0;
  outbox_.on_send = [&sends](const ::orrery::testing::SentMessage& m) {
    if (m.type == MsgType::kCall && ++sends == 1) return Status::Unavailable("queue full");
    return Status::Ok();
  };
  auto dropped = NewCall("dropped", "x");
  actors_.Submit(actor_, dropped);
  actors_.Submit(actor_, NewCall("kept", "x"));
  EXPECT_EQ(ErrorKind(*dropped), "Error");
  auto calls = Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(std::get<1>(calls[1]), "kept");
  EXPECT_EQ(std::get<2>(calls[1]), 1u);  // the dropped call used seq 0
}

}  // namespace
}  // namespace orrery::runtime
