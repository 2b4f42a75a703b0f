// Streaming results (docs/api.md "Streaming results"): a task or actor method returning
// orrery::Stream<T> hands each value to the caller while it still runs, holds back for a slow
// reader, and ends with its error, its cancellation or its death after the values it yielded.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

namespace {

using orrery_test::ActorReaper;
using orrery_test::kGetTimeoutMs;
using orrery_test::TempMarker;
using orrery_test::WaitFor;

using orrery_test::AwaitMarker;
using orrery_test::Exists;
using orrery_test::Touch;

// Yields 0..n-1; after `pause_at` values it waits for `gate` (when not empty).
orrery::Stream<int> Numbers(int n, int pause_at, std::string gate) {
  for (int i = 0; i < n; ++i) {
    if (i == pause_at && !gate.empty()) AwaitMarker(gate);
    co_yield i;
  }
}

orrery::Stream<int> FailsAfter(int n) {
  for (int i = 0; i < n; ++i) co_yield i;
  throw std::runtime_error("the producer gave up after " + std::to_string(n));
}

// Dies once `gate` opens, after n values (which reach the caller before: a value still
// queued in a process that dies is lost with it).
orrery::Stream<int> DiesAfter(int n, std::string gate) {
  for (int i = 0; i < n; ++i) co_yield i;
  AwaitMarker(gate);
  std::_Exit(3);
}

// Values above the inline limit: they travel through the object store.
orrery::Stream<std::vector<uint8_t>> Blocks(int n, int size) {
  for (int i = 0; i < n; ++i) co_yield std::vector<uint8_t>(size, uint8_t(i));
}

// A task that reads a stream of another task: the sum of 0..n-1.
int64_t SumOfNumbers(int n) {
  int64_t sum = 0;
  auto gen = orrery::Task(Numbers).Remote(n, -1, std::string());
  while (auto ref = gen.Next(kGetTimeoutMs)) sum += *orrery::Get(*ref, kGetTimeoutMs);
  return sum;
}

class Producer {
 public:
  static Producer* Create() { return new Producer(); }
  // Yields 0..n-1, counting what it yielded; after `pause_at` values it waits for `gate`.
  orrery::Stream<int> Produce(int n, int pause_at, std::string gate) {
    for (int i = 0; i < n; ++i) {
      if (i == pause_at && !gate.empty()) AwaitMarker(gate);
      produced_.fetch_add(1);
      co_yield i;
    }
  }
  // Yields until it is stopped.
  orrery::Stream<int> Forever() {
    for (int i = 0;; ++i) {
      produced_.fetch_add(1);
      co_yield i;
    }
  }
  int Produced() { return produced_.load(); }
  // Reads a stream of a task, as a task would.
  int64_t SumOfNumbers(int n) { return ::SumOfNumbers(n); }

 private:
  std::atomic<int> produced_{0};
};

ORRERY_REMOTE(Numbers, FailsAfter, DiesAfter, Blocks, SumOfNumbers, Producer::Create,
              &Producer::Produce, &Producer::Forever, &Producer::Produced, &Producer::SumOfNumbers);

// Reads every value left, checking they continue from `from`; returns the next index.
int ReadRest(orrery::ObjectRefGenerator<int>& gen, int from) {
  int next = from;
  while (auto ref = gen.Next(kGetTimeoutMs)) {
    EXPECT_EQ(*orrery::Get(*ref, kGetTimeoutMs), next);
    ++next;
  }
  return next;
}

TEST(StreamTest, ValuesArriveWhileTheProducerRuns) {
  TempMarker gate;
  auto gen = orrery::Task(Numbers).Remote(1000, 10, gate.path());
  // The first 10 come while the producer waits for the gate, which only this reader opens.
  for (int i = 0; i < 10; ++i) {
    auto ref = gen.Next(kGetTimeoutMs);
    ASSERT_TRUE(ref.has_value());
    EXPECT_EQ(*orrery::Get(*ref, kGetTimeoutMs), i);
  }
  Touch(gate.path());
  EXPECT_EQ(ReadRest(gen, 10), 1000);
  EXPECT_FALSE(gen.Next(kGetTimeoutMs).has_value());  // the end stays the end
  EXPECT_EQ(*orrery::Get(gen.Completion(), kGetTimeoutMs), 1000u);
}

// Many producers at once, read by one reader in turn: every value of every stream arrives,
// in its stream's order, each producer held back by its own window meanwhile.
TEST(StreamTest, ManyProducersReadByOneReaderAllArrive) {
  const int streams = 12, values = 2000;  // fewer producers than the test cluster's CPUs
  std::vector<orrery::ObjectRefGenerator<int>> gens;
  for (int s = 0; s < streams; ++s)
    gens.push_back(orrery::Task(Numbers).Remote(values, -1, std::string()));
  std::vector<int> next(streams, 0);
  for (int round = 0; round < values; ++round) {
    for (int s = 0; s < streams; ++s) {
      auto ref = gens[s].Next(kGetTimeoutMs);
      ASSERT_TRUE(ref.has_value()) << "stream " << s << " ended at " << next[s];
      ASSERT_EQ(*orrery::Get(*ref, kGetTimeoutMs), next[s]++) << "stream " << s;
    }
  }
  for (auto& gen : gens) {
    EXPECT_FALSE(gen.Next(kGetTimeoutMs).has_value());
    EXPECT_EQ(*orrery::Get(gen.Completion(), kGetTimeoutMs), uint64_t(values));
  }
}

TEST(StreamTest, TheProducersErrorComesAfterItsValues) {
  auto gen = orrery::Task(FailsAfter).Remote(10);
  for (int i = 0; i < 10; ++i) {
    auto ref = gen.Next(kGetTimeoutMs);
    ASSERT_TRUE(ref.has_value());
    EXPECT_EQ(*orrery::Get(*ref, kGetTimeoutMs), i);
  }
  try {
    gen.Next(kGetTimeoutMs);
    FAIL() << "the producer's error was not thrown";
  } catch (const orrery::RemoteError& e) {
    EXPECT_NE(std::string(e.what()).find("gave up after 10"), std::string::npos) << e.what();
    EXPECT_EQ(e.type(), "std::runtime_error");
  }
}

TEST(StreamTest, AProducerThatDiesGivesItsValuesThenWorkerCrashedError) {
  TempMarker gate;
  auto gen = orrery::Task(DiesAfter).Remote(5, gate.path());
  for (int i = 0; i < 5; ++i) {
    auto ref = gen.Next(kGetTimeoutMs);
    ASSERT_TRUE(ref.has_value());
    EXPECT_EQ(*orrery::Get(*ref, kGetTimeoutMs), i);
  }
  Touch(gate.path());
  EXPECT_THROW(gen.Next(kGetTimeoutMs), orrery::WorkerCrashedError);
}

TEST(StreamTest, AnActorKilledMidStreamGivesActorDiedError) {
  ActorReaper reaper;
  TempMarker gate;  // never opened: the actor is killed while it waits
  auto actor = reaper.Add(orrery::Actor(Producer::Create).Remote());
  auto gen = actor.Task(&Producer::Produce).Remote(1000, 5, gate.path());
  for (int i = 0; i < 5; ++i) {
    auto ref = gen.Next(kGetTimeoutMs);
    ASSERT_TRUE(ref.has_value());
    EXPECT_EQ(*orrery::Get(*ref, kGetTimeoutMs), i);
  }
  actor.Kill();
  EXPECT_THROW(gen.Next(kGetTimeoutMs), orrery::ActorDiedError);
}

TEST(StreamTest, ASlowReaderHoldsTheProducerBack) {
  ActorReaper reaper;
  auto actor = reaper.Add(orrery::Actor(Producer::Create).SetMaxConcurrency(2).Remote());
  auto gen = actor.Task(&Producer::Produce).Remote(1000, -1, std::string());
  ASSERT_TRUE(gen.Next(kGetTimeoutMs).has_value());
  auto produced = [&] {
    return *orrery::Get(actor.Task(&Producer::Produced).Remote(), kGetTimeoutMs);
  };
  const int bound = int(orrery::internal::kStreamWindow) + 2;
  ASSERT_TRUE(WaitFor([&] { return produced() >= int(orrery::internal::kStreamWindow); }));
  // Unbounded, the producer would finish its 1,000 values in milliseconds.
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) ASSERT_LE(produced(), bound);
  EXPECT_EQ(ReadRest(gen, 1), 1000);
  EXPECT_EQ(produced(), 1000);
}

TEST(StreamTest, CancelStopsTheProducer) {
  ActorReaper reaper;
  auto actor = reaper.Add(orrery::Actor(Producer::Create).Remote());
  auto gen = actor.Task(&Producer::Forever).Remote();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(gen.Next(kGetTimeoutMs).has_value());
  orrery::Cancel(gen);
  EXPECT_THROW(
      {
        for (int i = 0; i < 1000; ++i) gen.Next(kGetTimeoutMs);
      },
      orrery::TaskCancelledError);
  // The actor runs one call at a time: this one starts only once the producer stopped.
  EXPECT_GE(*orrery::Get(actor.Task(&Producer::Produced).Remote(), kGetTimeoutMs), 3);
}

TEST(StreamTest, DroppingTheGeneratorStopsTheProducer) {
  ActorReaper reaper;
  auto actor = reaper.Add(orrery::Actor(Producer::Create).Remote());
  {
    auto gen = actor.Task(&Producer::Forever).Remote();
    ASSERT_TRUE(gen.Next(kGetTimeoutMs).has_value());
  }
  EXPECT_GE(*orrery::Get(actor.Task(&Producer::Produced).Remote(), kGetTimeoutMs), 1);
}

TEST(StreamTest, AGeneratorDroppedBeforeItsFirstValueStopsTheProducer) {
  ActorReaper reaper;
  auto actor = reaper.Add(orrery::Actor(Producer::Create).Remote());
  { auto gen = actor.Task(&Producer::Forever).Remote(); }
  EXPECT_GE(*orrery::Get(actor.Task(&Producer::Produced).Remote(), kGetTimeoutMs), 0);
}

TEST(StreamTest, LargeValuesGoThroughTheStore) {
  const int size = 1 << 20;
  auto gen = orrery::Task(Blocks).Remote(6, size);
  int i = 0;
  while (auto ref = gen.Next(kGetTimeoutMs)) {
    auto v = orrery::Get(*ref, kGetTimeoutMs);
    ASSERT_EQ(int(v->size()), size);
    EXPECT_EQ((*v)[0], uint8_t(i));
    EXPECT_EQ((*v)[size - 1], uint8_t(i));
    ++i;
  }
  EXPECT_EQ(i, 6);
}

TEST(StreamTest, NextTimesOutAndCanBeCalledAgain) {
  TempMarker gate;
  auto gen = orrery::Task(Numbers).Remote(3, 1, gate.path());
  ASSERT_TRUE(gen.Next(kGetTimeoutMs).has_value());
  EXPECT_THROW(gen.Next(100), orrery::GetTimeoutError);
  Touch(gate.path());
  EXPECT_EQ(ReadRest(gen, 1), 3);
}

TEST(StreamTest, TasksAndActorsReadStreamsToo) {
  EXPECT_EQ(*orrery::Get(orrery::Task(SumOfNumbers).Remote(200), kGetTimeoutMs), 199 * 200 / 2);
  ActorReaper reaper;
  auto actor = reaper.Add(orrery::Actor(Producer::Create).Remote());
  EXPECT_EQ(*orrery::Get(actor.Task(&Producer::SumOfNumbers).Remote(100), kGetTimeoutMs),
            99 * 100 / 2);
}

TEST(StreamTest, AStreamCanBeReadInPlace) {
  orrery::Stream<int> s = Numbers(3, -1, "");
  std::vector<int> got;
  while (s.Next()) got.push_back(s.Value());
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2}));
  orrery::Stream<int> f = FailsAfter(1);
  ASSERT_TRUE(f.Next());
  EXPECT_THROW(f.Next(), std::runtime_error);
  EXPECT_FALSE(f.Next());
}

}  // namespace
