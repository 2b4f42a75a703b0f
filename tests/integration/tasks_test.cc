// Stateless tasks against real worker processes: submission and Get, argument and result
// types, errors from user code, submission-time validation, infeasible demands.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "orrery/resources.h"
#include "remote_functions.h"
#include "test_support.h"

namespace {

using orrery_test::kGetTimeoutMs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TaskTest, RemoteAndGet) {
  orrery::ObjectRef<int> r = orrery::Task(Add).Remote(1, 2);
  EXPECT_FALSE(r.IsNull());
  EXPECT_FALSE(r.ID().IsNil());
  std::shared_ptr<int> v = orrery::Get(r, kGetTimeoutMs);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(*v, 3);
  // Getting again, through the ref and without a timeout, gives the same value.
  EXPECT_EQ(*r.Get(), 3);
  EXPECT_EQ(*r.Get(kGetTimeoutMs), 3);
  EXPECT_EQ(*orrery::Get(r), 3);
}

TEST(TaskTest, RunsInAnotherProcess) {
  int pid = *orrery::Get(orrery::Task(WorkerPid).Remote(), kGetTimeoutMs);
  EXPECT_GT(pid, 0);
  EXPECT_NE(pid, int(getpid()));
}

TEST(TaskTest, ArgumentAndResultTypes) {
  std::string binary("nul\0byte\xff", 9);
  EXPECT_EQ(*orrery::Get(orrery::Task(Echo).Remote(binary), kGetTimeoutMs), binary);
  EXPECT_EQ(*orrery::Get(orrery::Task(Echo).Remote(std::string()), kGetTimeoutMs), "");
  EXPECT_THAT(*orrery::Get(orrery::Task(Range).Remote(5), kGetTimeoutMs),
              ElementsAre(0, 1, 2, 3, 4));
  EXPECT_TRUE(orrery::Get(orrery::Task(Range).Remote(0), kGetTimeoutMs)->empty());
  EXPECT_EQ(*orrery::Get(orrery::Task(Mirror).Remote(Point{1, 2}), kGetTimeoutMs), (Point{2, 1}));
  std::map<std::string, std::vector<int>> nested{{"a", {1, 2, 3}}, {"b", {}}};
  EXPECT_EQ(*orrery::Get(orrery::Task(EchoNested).Remote(nested), kGetTimeoutMs), nested);
  // Arguments convert to the parameter type on the caller's side: a const char* and a
  // short become std::string and int.
  EXPECT_EQ(*orrery::Get(orrery::Task(Echo).Remote("literal"), kGetTimeoutMs), "literal");
  short s = 7;
  EXPECT_EQ(*orrery::Get(orrery::Task(Add).Remote(s, 1), kGetTimeoutMs), 8);
}

TEST(TaskTest, LargeArgumentAndResult) {
  std::string big(4 << 20, 'z');
  big[12345] = 'a';
  std::shared_ptr<std::string> back = orrery::Get(orrery::Task(Echo).Remote(big), kGetTimeoutMs);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->size(), big.size());
  EXPECT_TRUE(*back == big);
}

TEST(TaskTest, VoidTask) {
  orrery::ObjectRef<void> r = orrery::Task(Nothing).Remote(1);
  EXPECT_NO_THROW(orrery::Get(r, kGetTimeoutMs));
}

TEST(TaskTest, GetVectorKeepsOrder) {
  std::vector<orrery::ObjectRef<int>> refs;
  for (int i = 0; i < 30; ++i) refs.push_back(orrery::Task(Add).Remote(i, i));
  std::vector<std::shared_ptr<int>> values = orrery::Get(refs, kGetTimeoutMs);
  ASSERT_EQ(values.size(), refs.size());
  for (int i = 0; i < 30; ++i) {
    ASSERT_NE(values[i], nullptr);
    EXPECT_EQ(*values[i], 2 * i) << "index " << i;
  }
  EXPECT_TRUE(orrery::Get(std::vector<orrery::ObjectRef<int>>{}).empty());
}

TEST(TaskTest, TaskCanSubmitAndGetATask) {
  EXPECT_EQ(*orrery::Get(orrery::Task(NestedAdd).Remote(20, 22), kGetTimeoutMs), 42);
}

TEST(TaskTest, ValidResourceDemandsRun) {
  EXPECT_EQ(
      *orrery::Get(orrery::Task(Add).SetResources({{"CPU", 0.5}}).Remote(1, 1), kGetTimeoutMs), 2);
  EXPECT_EQ(*orrery::Get(orrery::Task(Add).SetResources({{"CPU", 2}}).Remote(2, 2), kGetTimeoutMs),
            4);
  EXPECT_EQ(*orrery::Get(orrery::Task(Add).SetResource("Custom", 1).Remote(3, 3), kGetTimeoutMs),
            6);
}

TEST(TaskTest, InvalidResourcesAreConfigErrorAtSubmission) {
  for (const orrery::Resources& bad :
       {orrery::Resources{{"CPU", 1.5}}, orrery::Resources{{"", 1}}, orrery::Resources{{"GPU", 0}},
        orrery::Resources{{"CPU", -1}}}) {
    EXPECT_THROW(orrery::Task(Add).SetResources(bad).Remote(1, 2), orrery::ConfigError)
        << orrery::ToString(bad);
  }
  EXPECT_THROW(orrery::Task(Add).SetResource("CPU", 2.5).Remote(1, 2), orrery::ConfigError);
}

TEST(TaskTest, InfeasibleDemandIsInfeasibleError) {
  // Config::infeasible_timeout_s is 0.5 s for these tests.
  for (const orrery::Resources& demand :
       {orrery::Resources{{"CPU", 1000}}, orrery::Resources{{"Foo", 1}}}) {
    try {
      auto r = orrery::Task(Add).SetResources(demand).Remote(1, 2);
      orrery::Get(r, kGetTimeoutMs);
      ADD_FAILURE() << "expected InfeasibleError for " << orrery::ToString(demand);
    } catch (const orrery::InfeasibleError& e) {
      EXPECT_THAT(e.what(), HasSubstr(demand.begin()->first)) << "the message names the demand";
    }
  }
}

TEST(TaskTest, UserExceptionIsRemoteErrorWithTypeAndMessage) {
  auto r = orrery::Task(ThrowInvalidArgument).Remote(std::string("bad value 7"));
  try {
    orrery::Get(r, kGetTimeoutMs);
    FAIL() << "expected RemoteError";
  } catch (const orrery::RemoteError& e) {
    EXPECT_THAT(e.type(), HasSubstr("std::invalid_argument"));
    EXPECT_THAT(e.message(), HasSubstr("bad value 7"));
    EXPECT_THAT(e.function(), HasSubstr("ThrowInvalidArgument"));
    EXPECT_FALSE(e.where().empty());
    EXPECT_THAT(e.what(), HasSubstr("bad value 7"));
    EXPECT_STREQ(e.kind(), "RemoteError");
  }
  // The same error again from a second Get, and catchable as orrery::Error.
  EXPECT_THROW(orrery::Get(r, kGetTimeoutMs), orrery::Error);
}

TEST(TaskTest, UserDefinedExceptionTypeIsNamed) {
  try {
    orrery::Get(orrery::Task(ThrowCustom).Remote(std::string("custom trouble")), kGetTimeoutMs);
    FAIL() << "expected RemoteError";
  } catch (const orrery::RemoteError& e) {
    EXPECT_THAT(e.type(), HasSubstr("CustomTestError"));
    EXPECT_THAT(e.message(), HasSubstr("custom trouble"));
  }
}

TEST(TaskTest, NonStandardExceptionIsRemoteError) {
  EXPECT_THROW(orrery::Get(orrery::Task(ThrowNonStandard).Remote(42), kGetTimeoutMs),
               orrery::RemoteError);
  // The worker survived whatever was thrown.
  EXPECT_EQ(*orrery::Get(orrery::Task(Add).Remote(1, 1), kGetTimeoutMs), 2);
}

TEST(TaskTest, CrashedTaskIsRetriedWithMaxRetries) {
  orrery_test::TempMarker marker;
  EXPECT_EQ(
      *orrery::Get(orrery::Task(CrashOnce).SetMaxRetries(1).Remote(marker.path()), kGetTimeoutMs),
      7)
      << "the first attempt killed its worker; the retry should have run on another";
}

TEST(TaskTest, CrashedTaskWithoutRetriesFails) {
  orrery_test::TempMarker marker;
  try {
    orrery::Get(orrery::Task(CrashOnce).Remote(marker.path()), kGetTimeoutMs);
    FAIL() << "expected WorkerCrashedError: the worker died and no retries were allowed";
  } catch (const orrery::WorkerCrashedError& e) {
    EXPECT_THAT(e.what(), HasSubstr("CrashOnce")) << "the message names the task";
    EXPECT_THAT(e.what(), HasSubstr("died")) << "the message says its worker died";
  } catch (const orrery::GetTimeoutError&) {
    FAIL() << "a crashed task must fail, not hang";
  } catch (const orrery::Error& e) {
    FAIL() << "expected WorkerCrashedError, got " << e.kind() << ": " << e.what();
  }
  // Other tasks are unaffected.
  EXPECT_EQ(*orrery::Get(orrery::Task(Add).Remote(2, 2), kGetTimeoutMs), 4);
}

TEST(TaskTest, UnregisteredFunctionFailsAtSubmissionNamingIt) {
  try {
    orrery::Task(NotRegistered).Remote(1);
    FAIL() << "expected FunctionNotFoundError";
  } catch (const orrery::FunctionNotFoundError& e) {
    EXPECT_THAT(e.what(), HasSubstr("NotRegistered"));
    EXPECT_THAT(e.what(), HasSubstr("Add")) << "the message lists what is registered";
  }
}

TEST(TaskTest, GetWithTimeoutThrowsGetTimeoutError) {
  orrery_test::ActorReaper reaper;
  auto gate = reaper.Add(orrery::Actor(Gate::Create).SetMaxConcurrency(4).Remote());
  auto blocked = gate.Task(&Gate::WaitOpen).Remote(7, kGetTimeoutMs);
  EXPECT_THROW(orrery::Get(blocked, 100), orrery::GetTimeoutError);
  EXPECT_THROW(blocked.Get(50), orrery::GetTimeoutError);
  EXPECT_THROW(orrery::Get(std::vector<orrery::ObjectRef<int>>{blocked}, 50),
               orrery::GetTimeoutError);
  // A timeout does not spoil the ref: once the value exists it can be got.
  orrery::Get(gate.Task(&Gate::Open).Remote(), kGetTimeoutMs);
  EXPECT_EQ(*orrery::Get(blocked, kGetTimeoutMs), 7);
}

}  // namespace
