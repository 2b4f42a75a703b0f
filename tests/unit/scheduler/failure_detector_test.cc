// FailureDetector: suspicion after silence, a probe that finds the process gone, the
// tolerance, a clock that stops while the head is behind; ConnectProber against real
// loopback sockets.
#include "scheduler/src/failure_detector.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>

#include "tests/fakes/silent_listener.h"

namespace orrery::scheduler {
namespace {

// Records the probes asked for; the test says what they find.
class FakeProber final : public Prober {
 public:
  void Probe(const std::string& key, const std::string& address) override {
    probes.emplace_back(key, address);
  }
  std::vector<std::pair<std::string, ProbeOutcome>> Take() override {
    std::vector<std::pair<std::string, ProbeOutcome>> out;
    out.swap(outcomes);
    return out;
  }
  std::vector<std::pair<std::string, std::string>> probes;
  std::vector<std::pair<std::string, ProbeOutcome>> outcomes;
};

struct Detector {
  Detector() {
    auto p = std::make_unique<FakeProber>();
    prober = p.get();
    detector = std::make_unique<FailureDetector>(FailurePolicy{1.0, 3.0, 30.0}, std::move(p));
  }
  // Advances the head's clock to `now` in steps of 0.1 s (the head's tick), caught up or not,
  // and returns every verdict on the way.
  std::vector<FailureDetector::Verdict> RunTo(double now, bool caught_up = true) {
    std::vector<FailureDetector::Verdict> all;
    for (; t < now - 1e-9; t += 0.1) {
      detector->Advance(t + 0.1, caught_up);
      for (auto& v : detector->Tick()) all.push_back(v);
    }
    return all;
  }
  FakeProber* prober;
  std::unique_ptr<FailureDetector> detector;
  double t = 0;
};

using Kind = FailureDetector::Kind;

TEST(FailureDetectorTest, ASilentPeerIsSuspectedAndProbedThenDeadOnlyAfterTheTolerance) {
  Detector d;
  d.detector->Advance(0, true);
  d.detector->Heard("n1", "tcp://127.0.0.1:5");
  EXPECT_TRUE(d.RunTo(2.9).empty());
  auto v = d.RunTo(3.2);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, Kind::kSuspected);
  EXPECT_TRUE(d.detector->Suspected("n1"));
  ASSERT_FALSE(d.prober->probes.empty());
  EXPECT_EQ(d.prober->probes[0].second, "tcp://127.0.0.1:5");
  // The process is there (paused, say): probes keep finding it; dead only at the tolerance.
  for (int i = 0; i < 25; ++i) {
    d.prober->outcomes.emplace_back("n1", ProbeOutcome::kListening);
    EXPECT_TRUE(d.RunTo(4.2 + i).empty()) << "at " << d.t;
  }
  EXPECT_GE(d.prober->probes.size(), 20u);  // one a period
  v = d.RunTo(30.2);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, Kind::kDead);
  EXPECT_NE(v[0].cause.find("tolerance is 30 s"), std::string::npos) << v[0].cause;
  EXPECT_FALSE(d.detector->Suspected("n1"));
  EXPECT_TRUE(d.RunTo(40).empty());  // reported once, then forgotten
}

TEST(FailureDetectorTest, AProbeThatFindsNothingListeningIsDeathAtOnce) {
  Detector d;
  d.detector->Advance(0, true);
  d.detector->Heard("j1", "tcp://127.0.0.1:6");
  d.RunTo(3.2);
  d.prober->outcomes.emplace_back("j1", ProbeOutcome::kRefused);
  auto v = d.RunTo(3.3);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, Kind::kDead);
  EXPECT_NE(v[0].cause.find("its process is gone"), std::string::npos) << v[0].cause;
}

TEST(FailureDetectorTest, AHeartbeatClearsTheSuspicionAndOutranksAnOlderProbe) {
  Detector d;
  d.detector->Advance(0, true);
  d.detector->Heard("n1", "tcp://127.0.0.1:5");
  d.RunTo(3.2);
  ASSERT_TRUE(d.detector->Suspected("n1"));
  d.detector->Heard("n1", "tcp://127.0.0.1:5");
  d.prober->outcomes.emplace_back("n1", ProbeOutcome::kRefused);  // sent before the heartbeat
  auto v = d.RunTo(3.3);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, Kind::kCleared);
  EXPECT_FALSE(d.detector->Suspected("n1"));
  EXPECT_TRUE(d.RunTo(6.2).empty());
}

TEST(FailureDetectorTest, SilenceIsNotCountedWhileTheHeadIsBehindOrPaused) {
  Detector d;
  d.detector->Advance(0, true);
  d.detector->Heard("n1", "tcp://127.0.0.1:5");
  // A minute with the inbox never caught up: the heartbeats may be unread in its socket.
  EXPECT_TRUE(d.RunTo(60, /*caught_up=*/false).empty());
  // The head itself paused for a minute: at most two periods of it count.
  d.detector->Advance(120, true);
  EXPECT_TRUE(d.detector->Tick().empty());
  d.t = 120;
  EXPECT_TRUE(d.RunTo(120.5).empty());
  auto v = d.RunTo(121.2);  // 2 + 1.2 s of counted silence
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, Kind::kSuspected);
}

TEST(FailureDetectorTest, AForgottenPeerIsNotWatched) {
  Detector d;
  d.detector->Advance(0, true);
  d.detector->Heard("n1", "tcp://127.0.0.1:5");
  d.detector->Forget("n1");
  EXPECT_TRUE(d.RunTo(40).empty());
  EXPECT_TRUE(d.prober->probes.empty());
}

// The outcomes a prober reported, by key (Take hands each over once).
struct Outcomes {
  // Waits for the outcome for `key`, up to 10 s.
  ProbeOutcome Await(Prober& prober, const std::string& key) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!seen.count(key) && std::chrono::steady_clock::now() < deadline) {
      for (auto& [k, outcome] : prober.Take()) seen[k] = outcome;
      if (!seen.count(key)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!seen.count(key)) {
      ADD_FAILURE() << "no outcome for " << key;
      return ProbeOutcome::kNoAnswer;
    }
    return seen[key];
  }
  std::map<std::string, ProbeOutcome> seen;
};

TEST(ConnectProberTest, TellsAListeningPortFromAClosedOneAndRefusesNonsense) {
  orrery::testing::SilentListener listener;
  const std::string address = listener.address();
  ASSERT_FALSE(address.empty()) << "no loopback port could listen";
  auto prober = MakeConnectProber(1.0);
  Outcomes outcomes;
  prober->Probe("up", address);
  EXPECT_EQ(outcomes.Await(*prober, "up"), ProbeOutcome::kListening);
  listener.Close();  // the process is gone: nothing listens there any more
  prober->Probe("gone", address);
  EXPECT_EQ(outcomes.Await(*prober, "gone"), ProbeOutcome::kRefused);
  prober->Probe("ipc", "ipc:///nonexistent/orrery-probe-test");
  EXPECT_EQ(outcomes.Await(*prober, "ipc"), ProbeOutcome::kRefused);
  for (const char* bad : {"", "tcp://", "tcp://:80", "udp://1.2.3.4:5"})
    prober->Probe(std::string("bad") + bad, bad);
  for (const char* bad : {"", "tcp://", "tcp://:80", "udp://1.2.3.4:5"})
    EXPECT_EQ(outcomes.Await(*prober, std::string("bad") + bad), ProbeOutcome::kNoAnswer) << bad;
}

}  // namespace
}  // namespace orrery::scheduler
