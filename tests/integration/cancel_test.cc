// orrery::Cancel (docs/api.md "Cancellation"): a queued task goes; a running one sees
// RuntimeContext::IsCancelled and returns early; with force its worker is killed; actor calls
// not started yet are answered TaskCancelledError and the actor's later calls still run in
// order; Get of a cancelled call throws TaskCancelledError. The tasks hold the whole of the
// test cluster's custom resource, so a later task can run only once the cancelled one has
// given it back (long before the minute it would run uncancelled).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "orrery/orrery.h"
#include "test_support.h"

namespace {

using orrery_test::kGetTimeoutMs;
using orrery_test::kTestCustom;
using orrery_test::WaitFor;

// A file the call creates when it starts ("" : none), so that a test cancels it running.
void MarkStarted(const std::string& marker) {
  if (!marker.empty()) std::ofstream(marker) << "started\n";
}
bool Started(const std::string& marker) { return access(marker.c_str(), F_OK) == 0; }
std::string Marker(const char* name) {
  std::string path = "/tmp/orrery-cancel-test-" + std::to_string(getpid()) + "-" + name;
  unlink(path.c_str());
  return path;
}

// Runs until cancelled (or max_ms): returns how long it ran.
int Spin(int max_ms, std::string marker) {
  MarkStarted(marker);
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return int(std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - start)
                   .count());
  };
  while (elapsed() < max_ms && !orrery::GetRuntimeContext().IsCancelled()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return elapsed();
}

// Never looks at the flag.
int Sleep(int ms, std::string marker) {
  MarkStarted(marker);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}

class Worker {
 public:
  static Worker* Create() { return new Worker(); }
  int Spin(int max_ms, std::string marker) { return ::Spin(max_ms, marker); }
  int Echo(int x) { return x; }
};

ORRERY_REMOTE(Spin, Sleep, Worker::Create, &Worker::Spin, &Worker::Echo);

const orrery::Resources kAllCustom = {{"Custom", kTestCustom}};
constexpr int kMinute = 60000;
// What a cancelled call's Get may take at most here: far less than the minute it would run.
constexpr int kDeadlineMs = 20000;

template <typename T>
void ExpectCancelled(const orrery::ObjectRef<T>& ref) {
  EXPECT_THROW(orrery::Get(ref, kDeadlineMs), orrery::TaskCancelledError);
}

// A task that needs what the cancelled one held: it runs once that was given back.
void ExpectCustomFreed() {
  auto next = orrery::Task(Sleep).SetResources(kAllCustom).Remote(1, std::string());
  EXPECT_EQ(*orrery::Get(next, kDeadlineMs), 1) << "the cancelled task gave its resources back";
}

TEST(CancelTest, AQueuedTaskGoesAndARunningOneSeesTheFlag) {
  std::string marker = Marker("spin");
  auto running = orrery::Task(Spin).SetResources(kAllCustom).Remote(kMinute, marker);
  auto queued = orrery::Task(Spin).SetResources(kAllCustom).Remote(kMinute, std::string());
  ASSERT_TRUE(WaitFor([&] { return Started(marker); })) << "the first task runs";
  orrery::Cancel(queued);
  ExpectCancelled(queued);
  orrery::Cancel(running);
  ExpectCancelled(running);
  ExpectCustomFreed();  // the running task returned early: it saw the flag
  unlink(marker.c_str());
}

TEST(CancelTest, ForceKillsTheWorkerOfATaskThatDoesNotLook) {
  std::string marker = Marker("sleep");
  auto sleeping = orrery::Task(Sleep).SetResources(kAllCustom).Remote(kMinute, marker);
  ASSERT_TRUE(WaitFor([&] { return Started(marker); })) << "the task runs";
  orrery::Cancel(sleeping, /*force=*/true);
  ExpectCancelled(sleeping);
  ExpectCustomFreed();  // its worker was killed: it would have slept a minute
  auto other = orrery::Task(Sleep).Remote(1, std::string());
  EXPECT_EQ(*orrery::Get(other, kDeadlineMs), 1) << "the cluster goes on";
  unlink(marker.c_str());
}

TEST(CancelTest, ActorCallsNotStartedAreCancelledAndLaterOnesStillRun) {
  auto actor = orrery::Actor(Worker::Create).Remote();
  EXPECT_EQ(*orrery::Get(actor.Task(&Worker::Echo).Remote(1), kGetTimeoutMs), 1);
  std::string marker = Marker("actor");
  auto busy = actor.Task(&Worker::Spin).Remote(kMinute, marker);
  auto waiting = actor.Task(&Worker::Echo).Remote(2);
  ASSERT_TRUE(WaitFor([&] { return Started(marker); })) << "the first call runs";
  orrery::Cancel(waiting);
  ExpectCancelled(waiting);
  EXPECT_THROW(orrery::Cancel(busy, /*force=*/true), orrery::ConfigError)
      << "force would kill the actor";
  orrery::Cancel(busy);  // running: it sees the flag and returns
  ExpectCancelled(busy);
  EXPECT_EQ(*orrery::Get(actor.Task(&Worker::Echo).Remote(3), kDeadlineMs), 3)
      << "the actor goes on with its next call (the running one saw the flag)";
  actor.Kill();
  unlink(marker.c_str());
}

TEST(CancelTest, AFinishedCallKeepsItsResultAndOnlyTheCallerCancels) {
  auto done = orrery::Task(Sleep).Remote(2, std::string());
  EXPECT_EQ(*orrery::Get(done, kGetTimeoutMs), 2);
  orrery::Cancel(done);
  EXPECT_EQ(*orrery::Get(done, kGetTimeoutMs), 2);
  auto put = orrery::Put(5);
  orrery::Cancel(put);  // a value already there: nothing changes
  EXPECT_EQ(*orrery::Get(put, kGetTimeoutMs), 5);
  orrery::ObjectRef<int> foreign(
      orrery::internal::MakeRef(orrery::ObjectId::Random(), "tcp://elsewhere:1"));
  EXPECT_THROW(orrery::Cancel(foreign), orrery::Error) << "another process's call";
  orrery::ObjectRef<int> unknown(orrery::internal::MakeRef(orrery::ObjectId::Random(), ""));
  EXPECT_THROW(orrery::Cancel(unknown), orrery::Error) << "no call of this process";
  EXPECT_THROW(orrery::Cancel(orrery::ObjectRef<int>()), orrery::Error);
}

}  // namespace
