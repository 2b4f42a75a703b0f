// The call path without gaps, as a property: two callers' ActorSubmitters and an actor's
// CallOrder talk through a simulated transport that refuses sends (a full queue), delays,
// reorders and drops messages at random, on a clock of the test's own. For thousands of
// seeds: every call ends with its value or a typed error (ConnectionError for a call the
// transport lost) within its deadline, every call that was not lost ran, and the calls of
// one caller that ran, ran in their submission order. No sockets, no threads, no sleeps.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "actors/src/actor_submitter.h"
#include "actors/src/call_order.h"
#include "tests/unit/actors/submitter_fixture.h"

namespace orrery::runtime {
namespace {

using proto::MsgType;

constexpr const char* kWorker = "tcp://worker";
constexpr double kGapTimeoutS = 45;  // CallOrderOptions' default
constexpr double kMaxDelayS = 3;

// One caller process: its own store, outbox and submitter.
struct Caller : testing::SubmitterFixture {
  Caller(const std::string& address, const ActorId& actor)
      : submitter(self_, outbox_, head_, store_, resolver_) {
    self_.address = address;
    head_.SetReplyTo(address);
    submitter.AddOwned(actor, false, 0);
    proto::ActorUpdateMsg u;
    u.actor_id = actor.Binary();
    u.state = int(proto::ActorState::kAlive);
    u.incarnation = 0;
    u.address = kWorker;
    submitter.OnUpdate(u);
  }
  void TestBody() override {}
  using SubmitterFixture::NewCall;
  using SubmitterFixture::outbox_;
  using SubmitterFixture::self_;
  using SubmitterFixture::store_;

  ActorSubmitter submitter;
  std::vector<std::shared_ptr<PendingCall>> calls;  // in submission order
  std::map<std::string, size_t> index;              // return id -> position in calls
  std::vector<size_t> ran;                          // positions, in the order they ran
};

// A message in flight, due at `at`.
struct Event {
  double at;
  uint64_t order;  // ties: in the order they were scheduled
  int caller;
  enum Kind { kCall, kReply, kLost, kSent } kind;
  proto::CallMsg call;
  proto::CallsLostMsg lost;
  proto::CallsSentMsg sent;
  bool operator>(const Event& o) const { return at != o.at ? at > o.at : order > o.order; }
};

class Simulation {
 public:
  explicit Simulation(uint32_t seed) : rng_(seed) {
    for (int i = 0; i < 2; ++i) {
      callers_.push_back(std::make_unique<Caller>("tcp://caller" + std::to_string(i), actor_));
      callers_[i]->outbox_.on_send = [this, i](const ::orrery::testing::SentMessage& m) {
        return OnSend(i, m);
      };
    }
  }

  // Submits `n` calls over the first seconds, runs until every call ended or the deadline.
  void Run(int n) {
    std::uniform_int_distribution<int> who(0, 1);
    std::uniform_real_distribution<double> gap(0, 0.2);
    for (int i = 0; i < n; ++i) {
      Advance(now_ + gap(rng_));
      Submit(*callers_[who(rng_)]);
    }
    last_submit_ = now_;
    while (!AllEnded() && now_ < Deadline()) Advance(now_ + 0.5);
  }

  // A lost call is announced within kAnnounceS (a few announcements may be lost too), given
  // up on kGapTimeoutS after, each message delayed up to kMaxDelayS, ticks a second apart.
  double Deadline() const {
    return last_submit_ + 4 * ActorSubmitter::kAnnounceS + kGapTimeoutS + 4 * kMaxDelayS + 4;
  }

  void Check(uint32_t seed) {
    for (size_t c = 0; c < callers_.size(); ++c) {
      Caller& caller = *callers_[c];
      for (size_t i = 0; i < caller.calls.size(); ++i) {
        auto r = caller.store_.Get(caller.calls[i]->return_id, 0);
        ASSERT_TRUE(r.ok()) << "seed " << seed << ": call " << i << " of caller " << c
                            << " had not ended " << Deadline() - last_submit_
                            << " s after the last submission";
        if (r->error) {
          EXPECT_EQ(r->error->kind, proto::ErrorKind::kConnectionError)
              << "seed " << seed << ": " << r->error->message;
          EXPECT_FALSE(ran_ids_.count(caller.calls[i]->return_id.Binary()))
              << "seed " << seed << ": a call that ran was reported lost";
        } else {
          EXPECT_TRUE(ran_ids_.count(caller.calls[i]->return_id.Binary()))
              << "seed " << seed << ": a value for a call that never ran";
        }
      }
      for (size_t k = 1; k < caller.ran.size(); ++k)
        ASSERT_LT(caller.ran[k - 1], caller.ran[k]) << "seed " << seed << ": out of order";
    }
  }

  int refused() const { return refused_; }
  int dropped() const { return dropped_; }

 private:
  Status OnSend(int caller, const ::orrery::testing::SentMessage& m) {
    if (m.type != MsgType::kCall && m.type != MsgType::kCallsSent) return Status::Ok();
    std::uniform_real_distribution<double> p(0, 1);
    if (p(rng_) < 0.15) {
      ++refused_;
      return Status::Unavailable("the send queue to " + m.address + " is full");
    }
    if (p(rng_) < 0.05) {  // handed over, then lost (a socket that gave way)
      ++dropped_;
      return Status::Ok();
    }
    Event e{now_ + Delay(), next_order_++, caller, Event::kCall, {}, {}, {}};
    if (m.type == MsgType::kCall) {
      e.call = m.As<proto::CallMsg>();
    } else {
      e.kind = Event::kSent;
      e.sent = m.As<proto::CallsSentMsg>();
    }
    events_.push(e);
    return Status::Ok();
  }

  double Delay() {
    std::uniform_real_distribution<double> d(0, kMaxDelayS);
    return d(rng_);
  }

  void Submit(Caller& c) {
    auto call = c.NewCall("method", "arg");
    c.index[call->return_id.Binary()] = c.calls.size();
    c.calls.push_back(call);
    c.submitter.Submit(actor_, call);
  }

  // Delivers every event due by `t`; ticks the worker and the callers once a second.
  void Advance(double t) {
    while (!events_.empty() && events_.top().at <= t) {
      Event e = events_.top();
      events_.pop();
      now_ = e.at;
      Deliver(e);
      while (next_tick_ <= now_) Tick();
    }
    now_ = t;
    while (next_tick_ <= now_) Tick();
  }

  void Tick() {
    std::vector<int> ready;
    std::vector<LostCalls> lost;
    order_.Tick(next_tick_, /*caught_up=*/true, &ready, &lost);
    Run(ready);
    for (const auto& l : lost) {
      int caller = l.caller == callers_[0]->self_.address ? 0 : 1;
      proto::CallsLostMsg m{actor_.Binary(), kWorker, l.first_seq, l.end_seq, "lost on the way"};
      events_.push(Event{next_tick_ + Delay(), next_order_++, caller, Event::kLost, {}, m, {}});
    }
    for (auto& c : callers_) c->submitter.Tick(next_tick_);
    next_tick_ += 1;
  }

  void Deliver(const Event& e) {
    Caller& c = *callers_[e.caller];
    if (e.kind == Event::kCall) {
      std::vector<int> ready;
      int key = int(pending_.size());
      pending_.push_back(e);
      auto admit = order_.Add(e.call.reply_to, e.call.seq, e.call.first_pending, key, now_, &ready);
      ASSERT_EQ(admit, CallOrder<int>::Admit::kQueued) << "seq " << e.call.seq;
      Run(ready);
    } else if (e.kind == Event::kReply) {
      c.store_.PutValue(ObjectId(UniqueId::FromBinary(e.call.object_id)),
                        std::make_shared<const std::string>("value"));
      c.submitter.OnReply(actor_, e.call.seq);
    } else if (e.kind == Event::kSent) {
      std::vector<int> ready;
      order_.Expect(e.sent.reply_to, e.sent.first_pending, e.sent.end_seq, now_, &ready);
      Run(ready);
    } else {
      c.submitter.OnCallsLost(e.lost);
    }
  }

  // The worker runs the calls that are ready, in order, and replies to each.
  void Run(const std::vector<int>& ready) {
    for (int key : ready) {
      const Event& e = pending_[size_t(key)];
      Caller& c = *callers_[e.caller];
      c.ran.push_back(c.index.at(e.call.object_id));
      ran_ids_.insert(e.call.object_id);
      order_.Finished(e.call.reply_to, now_);
      events_.push(Event{now_ + Delay(), next_order_++, e.caller, Event::kReply, e.call, {}, {}});
    }
  }

  bool AllEnded() {
    for (auto& c : callers_)
      for (auto& call : c->calls)
        if (!c->store_.Get(call->return_id, 0).ok()) return false;
    return true;
  }

  std::mt19937 rng_;
  ActorId actor_ = ActorId::Random();
  std::vector<std::unique_ptr<Caller>> callers_;
  CallOrder<int> order_;
  std::vector<Event> pending_;  // calls delivered to the worker, by key
  std::set<std::string> ran_ids_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  double now_ = 0;
  double next_tick_ = 1;
  double last_submit_ = 0;
  uint64_t next_order_ = 0;
  int refused_ = 0;
  int dropped_ = 0;
};

TEST(CallPathPropertyTest, EveryCallEndsInOrderWhateverTheTransportDoes) {
  int refused = 0, dropped = 0;
  for (uint32_t seed = 1; seed <= 2000; ++seed) {
    Simulation sim(seed);
    sim.Run(int(5 + seed % 40));
    sim.Check(seed);
    if (::testing::Test::HasFailure()) return;
    refused += sim.refused();
    dropped += sim.dropped();
  }
  // The transport's misbehaviour was exercised, not just allowed.
  EXPECT_GT(refused, 1000);
  EXPECT_GT(dropped, 100);
}

}  // namespace
}  // namespace orrery::runtime
