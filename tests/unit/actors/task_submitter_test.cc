// TaskSubmitter: tasks of one shape share leases (a few requests per shape, eight tasks in
// flight per lease); a lease's worker death retries its tasks while retries are left; a
// refused lease fails what waits, a lease lost before its grant is asked for again; idle
// leases go back. Lease replies and task replies are delivered by hand; no sockets.
#include "actors/src/task_submitter.h"

#include <chrono>
#include <future>
#include <thread>

#include "core/internal/clock.h"
#include "tests/unit/actors/submitter_fixture.h"

namespace orrery::runtime {
namespace {

using proto::MsgType;

class TaskSubmitterTest : public testing::SubmitterFixture {
 protected:
  TaskSubmitterTest()
      : tasks_(self_, config_, outbox_, head_, store_, resolver_,
               [this](int ms) { tick_ms_.push_back(ms); }) {
    options_.resources = {{"CPU", 1}};
  }

  std::vector<proto::LeaseRequestMsg> LeaseRequests() {
    std::vector<proto::LeaseRequestMsg> out;
    for (const auto& m : outbox_.Sent(MsgType::kRequestLease)) {
      EXPECT_EQ(m.address, "tcp://head");
      out.push_back(m.As<proto::LeaseRequestMsg>());
    }
    return out;
  }
  // Calls sent to `worker`, by function name.
  std::vector<std::string> CallsTo(const std::string& worker) {
    std::vector<std::string> out;
    for (const auto& m : outbox_.Sent(MsgType::kCall))
      if (m.address == worker) out.push_back(m.As<proto::CallMsg>().function);
    return out;
  }
  void Reply(const std::string& lease_id, bool ok, const std::string& worker = "",
             const std::string& kind = "", const std::string& message = "") {
    proto::LeaseReplyMsg r;
    r.lease_id = lease_id;
    r.ok = ok;
    r.worker_address = worker;
    r.error_kind = proto::ErrorKindFromName(kind);
    r.message = message;
    tasks_.OnLeaseReply(r);
  }
  std::vector<std::shared_ptr<PendingCall>> SubmitN(int n, const std::string& prefix = "t") {
    std::vector<std::shared_ptr<PendingCall>> calls;
    for (int i = 0; i < n; ++i) {
      calls.push_back(NewCall(prefix + std::to_string(i), "x"));
      tasks_.Submit(options_, calls.back());
    }
    return calls;
  }

  Config config_;
  internal::CallOptions options_;
  std::vector<int> tick_ms_;
  TaskSubmitter tasks_;
};

TEST_F(TaskSubmitterTest, TasksOfOneShapeShareALease) {
  SubmitN(3);
  auto requests = LeaseRequests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].resources, (std::map<std::string, double>{{"CPU", 1}}));
  EXPECT_EQ(requests[0].job_id, self_.job.Binary());
  EXPECT_EQ(requests[0].argv, self_.argv);
  EXPECT_EQ(requests[0].reply_to, self_.address);
  EXPECT_EQ(tick_ms_, std::vector<int>{TaskSubmitter::kLeaseTickMs});
  EXPECT_TRUE(outbox_.Sent(MsgType::kCall).empty());
  Reply(requests[0].lease_id, true, "tcp://w1");
  EXPECT_EQ(CallsTo("tcp://w1"), (std::vector<std::string>{"t0", "t1", "t2"}));
  for (const auto& m : outbox_.Sent(MsgType::kCall))
    EXPECT_EQ(m.As<proto::CallMsg>().lease_id, requests[0].lease_id);
}

TEST_F(TaskSubmitterTest, AShapeAsksForAtMostFourLeasesAtOnce) {
  SubmitN(17);  // three leases' worth
  EXPECT_EQ(LeaseRequests().size(), 3u);
  SubmitN(40, "u");
  EXPECT_EQ(LeaseRequests().size(), 4u);
}

TEST_F(TaskSubmitterTest, ALeaseRunsEightTasksAtATime) {
  SubmitN(10);
  Reply(LeaseRequests()[0].lease_id, true, "tcp://w1");
  EXPECT_EQ(CallsTo("tcp://w1").size(), 8u);
  auto first = outbox_.Sent(MsgType::kCall)[0].As<proto::CallMsg>();
  tasks_.OnReply(first.lease_id, ObjectId(UniqueId::FromBinary(first.object_id)));
  EXPECT_EQ(CallsTo("tcp://w1").size(), 9u);
}

TEST_F(TaskSubmitterTest, ShapesThatDifferDoNotShareLeases) {
  internal::CallOptions other = options_;
  other.max_retries = 3;  // the memory monitor treats retried tasks differently
  EXPECT_NE(TaskSubmitter::KeyOf(options_), TaskSubmitter::KeyOf(other));
  tasks_.Submit(options_, NewCall("a", "x"));
  tasks_.Submit(other, NewCall("b", "x"));
  EXPECT_EQ(LeaseRequests().size(), 2u);
}

TEST_F(TaskSubmitterTest, AWorkerDeathRetriesItsTasksWhileRetriesLast) {
  options_.max_retries = 1;
  auto calls = SubmitN(2);
  Reply(LeaseRequests()[0].lease_id, true, "tcp://w1");
  Reply(LeaseRequests()[0].lease_id, false, "", "WorkerCrashedError", "segfault");
  ASSERT_EQ(LeaseRequests().size(), 2u);  // asked again for the retried tasks
  Reply(LeaseRequests()[1].lease_id, true, "tcp://w2");
  EXPECT_EQ(CallsTo("tcp://w2").size(), 2u);
  Reply(LeaseRequests()[1].lease_id, false, "", "WorkerCrashedError", "segfault again");
  EXPECT_EQ(ErrorKind(*calls[0]), "WorkerCrashedError");
  EXPECT_NE(ErrorMessage(*calls[1]).find("segfault again"), std::string::npos);
}

TEST_F(TaskSubmitterTest, AMemoryKillFailsWithItsKind) {
  auto calls = SubmitN(1);
  Reply(LeaseRequests()[0].lease_id, true, "tcp://w1");
  Reply(LeaseRequests()[0].lease_id, false, "", "OutOfMemoryError", "memory above 95%");
  EXPECT_EQ(ErrorKind(*calls[0]), "OutOfMemoryError");
}

TEST_F(TaskSubmitterTest, ARefusedLeaseFailsTheWaitingTasks) {
  auto calls = SubmitN(2);
  Reply(LeaseRequests()[0].lease_id, false, "", "InfeasibleError", "no node has a GPU");
  EXPECT_EQ(ErrorKind(*calls[0]), "InfeasibleError");
  EXPECT_EQ(ErrorMessage(*calls[1]), "no node has a GPU");
}

// A task that takes an earlier task's result fails with it: the refusal fails the first
// under the submitter's lock, and the second's argument callback runs once that lock is
// released. On a thread, so that a deadlock fails the test at its deadline.
TEST_F(TaskSubmitterTest, ATaskOnAFailedTasksResultFailsWithoutDeadlock) {
  auto first = NewCall("first", "x");
  tasks_.Submit(options_, first);
  auto second = NewCall("second");
  second->slots.push_back(internal::ArgSlot{
      "", std::make_shared<internal::RefHolder>(first->return_id, self_.address)});
  tasks_.Submit(options_, second);
  std::string lease = LeaseRequests()[0].lease_id;
  auto done = std::make_shared<std::promise<void>>();
  std::thread([this, done, lease] {
    Reply(lease, false, "", "InfeasibleError", "no node has a GPU");
    done->set_value();
  }).detach();
  ASSERT_EQ(done->get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "failing the tasks deadlocked";
  EXPECT_EQ(ErrorKind(*first), "InfeasibleError");
  EXPECT_EQ(ErrorKind(*second), "InfeasibleError");
}

TEST_F(TaskSubmitterTest, ALeaseLostBeforeItsGrantIsAskedForAgainABoundedNumberOfTimes) {
  auto calls = SubmitN(1);
  for (int i = 0; i < 16; ++i) {
    ASSERT_EQ(LeaseRequests().size(), size_t(i + 1));
    Reply(LeaseRequests().back().lease_id, false, "", "WorkerDied", "node died");
    EXPECT_EQ(ErrorKind(*calls[0]), "");
  }
  Reply(LeaseRequests().back().lease_id, false, "", "WorkerDied", "node died");
  EXPECT_EQ(ErrorKind(*calls[0]), "WorkerCrashedError");
}

// A lease request sent as the head stopped is lost with its connection: one not answered
// within kLeaseResendS is sent again, the same lease, until it is granted.
TEST_F(TaskSubmitterTest, AnUnansweredLeaseRequestIsSentAgainUntilGranted) {
  SubmitN(1);
  double now = MonotonicSeconds();
  tasks_.ResendLeaseRequests(now);
  ASSERT_EQ(LeaseRequests().size(), 1u);
  tasks_.ResendLeaseRequests(now + TaskSubmitter::kLeaseResendS + 0.1);
  auto requests = LeaseRequests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].lease_id, requests[0].lease_id);
  EXPECT_EQ(requests[1].resources, requests[0].resources);
  EXPECT_EQ(requests[1].reply_to, self_.address);
  tasks_.ResendLeaseRequests(now + TaskSubmitter::kLeaseResendS + 0.2);
  EXPECT_EQ(LeaseRequests().size(), 2u);  // not again before another interval
  Reply(requests[0].lease_id, true, "tcp://w1");
  tasks_.ResendLeaseRequests(now + 60);
  EXPECT_EQ(LeaseRequests().size(), 2u);  // granted: never again
  EXPECT_EQ(CallsTo("tcp://w1").size(), 1u);
}

TEST_F(TaskSubmitterTest, IdleLeasesGoBackAndTheTickSlowsDown) {
  SubmitN(1);
  auto lease = LeaseRequests()[0].lease_id;
  Reply(lease, true, "tcp://w1");
  double later = MonotonicSeconds() + 60;
  tasks_.ReturnIdleLeases(later);
  EXPECT_TRUE(outbox_.Sent(MsgType::kReturnLease).empty());  // its task is still running
  auto call = outbox_.Sent(MsgType::kCall)[0].As<proto::CallMsg>();
  tasks_.OnReply(lease, ObjectId(UniqueId::FromBinary(call.object_id)));
  tasks_.ReturnIdleLeases(later);
  auto returned = outbox_.Sent(MsgType::kReturnLease);
  ASSERT_EQ(returned.size(), 1u);
  EXPECT_EQ(returned[0].As<proto::ReturnLeaseMsg>().lease_id, lease);
  EXPECT_EQ(tick_ms_.back(), TaskSubmitter::kIdleTickMs);
}

TEST_F(TaskSubmitterTest, AGrantNobodyWantsGoesStraightBack) {
  Reply("unknown-lease", true, "tcp://w1");
  auto returned = outbox_.Sent(MsgType::kReturnLease);
  ASSERT_EQ(returned.size(), 1u);
  EXPECT_EQ(returned[0].As<proto::ReturnLeaseMsg>().lease_id, "unknown-lease");
}

TEST_F(TaskSubmitterTest, StoppingReturnsRequestedAndGrantedLeases) {
  SubmitN(9);  // two lease requests
  Reply(LeaseRequests()[0].lease_id, true, "tcp://w1");
  tasks_.ReturnAllLeases();
  EXPECT_EQ(outbox_.Sent(MsgType::kReturnLease).size(), 2u);
}

TEST_F(TaskSubmitterTest, ATaskWaitsForItsArgument) {
  auto call = NewCall("f");
  ObjectId dep = AddPendingRef(*call);
  tasks_.Submit(options_, call);
  EXPECT_TRUE(LeaseRequests().empty());
  store_.PutValue(dep, std::make_shared<const std::string>("v"));
  EXPECT_EQ(LeaseRequests().size(), 1u);
}

}  // namespace
}  // namespace orrery::runtime
