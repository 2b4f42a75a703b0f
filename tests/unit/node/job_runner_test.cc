// JobRunner: what the node refuses to run is reported to the head, never run; a job waits
// for its executable (one fetch from the head), and one stopped or not fetched before it
// started is reported as failed to start. No driver process is started here.
#include "node/src/job_runner.h"

#include <gtest/gtest.h>

#include "core/internal/clock.h"
#include "core/internal/file_hash.h"
#include "tests/fakes/recording_outbox.h"

namespace orrery::node {
namespace {

using ::orrery::testing::RecordingOutbox;
using proto::MsgType;

struct JobRunnerTest : ::testing::Test {
  JobRunnerTest()
      : cache(outbox, "tcp://head", "/nonexistent-node-binaries"),
        jobs({"tcp://head", "node-binary-id", "node1", "s3cret", "/nonexistent-logs", {}}, outbox,
             cache) {}
  static proto::StartJobMsg Job(const std::string& id) {
    proto::StartJobMsg m;
    m.submission_id = id;
    m.argv = {"/bin/driver", "--flag"};
    m.binary_hash = HashBytes("the driver");
    return m;
  }
  std::optional<proto::JobEventMsg> Event() {
    return outbox.Take<proto::JobEventMsg>(MsgType::kJobEvent, "tcp://head");
  }
  RecordingOutbox outbox;
  ExecutableCache cache;
  JobRunner jobs;
};

TEST_F(JobRunnerTest, WhatCannotBeRunIsReportedAndNotRun) {
  auto empty = Job("job_empty");
  empty.argv.clear();
  auto unhashed = Job("job_unhashed");
  unhashed.binary_hash = "not a sha-256";
  auto elsewhere = Job("job_arch");
  elsewhere.arch = "not-this-machine";
  for (const auto& [m, why] :
       {std::pair{empty, "command line"}, std::pair{unhashed, "not a SHA-256"},
        std::pair{elsewhere, "built for not-this-machine"}}) {
    jobs.OnStart(m, "tcp://node");
    auto ev = Event();
    ASSERT_TRUE(ev) << why;
    EXPECT_EQ(ev->kind, int(proto::JobEventKind::kFailedToStart));
    EXPECT_EQ(ev->submission_id, m.submission_id);
    EXPECT_EQ(ev->node_secret, "s3cret");
    EXPECT_NE(ev->cause.find(why), std::string::npos) << ev->cause;
  }
  EXPECT_EQ(outbox.Count(MsgType::kFetchBinary), 0u);
}

// A job's event that dies with a stopping head (its exit, say) is sent again until the head
// acknowledges it: before, the restarted head had the job RUNNING for good.
TEST_F(JobRunnerTest, AnEventIsSentAgainUntilTheHeadAcknowledgesIt) {
  jobs.SetNode("tcp://node", nullptr);
  auto empty = Job("job_lost");
  empty.argv.clear();
  jobs.OnStart(empty, "tcp://node");
  auto first = Event();
  ASSERT_TRUE(first);
  EXPECT_NE(first->request_id, 0u);
  EXPECT_EQ(first->reply_to, "tcp://node");
  double now = MonotonicSeconds();
  jobs.ResendEvents(now + HeadEvents::kResendS / 2);
  EXPECT_FALSE(Event()) << "sent again before kResendS";
  jobs.ResendEvents(now + HeadEvents::kResendS);
  auto again = Event();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->request_id, first->request_id);
  EXPECT_EQ(again->submission_id, "job_lost");
  EXPECT_EQ(again->kind, int(proto::JobEventKind::kFailedToStart));
  EXPECT_FALSE(jobs.OnEventAck(first->request_id + 1)) << "another request's answer";
  EXPECT_TRUE(jobs.OnEventAck(first->request_id));
  jobs.ResendEvents(now + 10 * HeadEvents::kResendS);
  EXPECT_FALSE(Event()) << "sent again once acknowledged";
  // The head sends a start again until it hears of the job: one that ended here is ignored.
  jobs.OnStart(empty, "tcp://node");
  EXPECT_FALSE(Event()) << "a resent start was handled again";
}

TEST_F(JobRunnerTest, AMalformedSubmissionIdIsIgnored) {
  jobs.OnStart(Job("Not/A/Valid/Id"), "tcp://node");
  EXPECT_TRUE(outbox.Sent().empty());
}

TEST_F(JobRunnerTest, AJobWaitsForItsExecutableAndFailsWhenItCannotBeFetched) {
  auto m = Job("job_1");
  jobs.OnStart(m, "tcp://node");
  jobs.OnStart(m, "tcp://node");  // a resend
  auto asks = outbox.Sent(MsgType::kFetchBinary);
  ASSERT_EQ(asks.size(), 1u);
  EXPECT_EQ(asks[0].As<proto::BinaryMsg>().reply_to, "tcp://node");
  proto::ListWorkersReplyMsg listed;
  jobs.List(&listed);
  ASSERT_EQ(listed.workers.size(), 1u);
  EXPECT_EQ(listed.workers[0].state, "STARTING");
  EXPECT_EQ(listed.workers[0].job_id, "job_1");
  jobs.OnExecutable("job_1", m.binary_hash, false, "the head does not vouch for it");
  auto ev = Event();
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, int(proto::JobEventKind::kFailedToStart));
  EXPECT_NE(ev->cause.find("could not be fetched"), std::string::npos) << ev->cause;
  listed = {};
  jobs.List(&listed);
  EXPECT_TRUE(listed.workers.empty());
}

TEST_F(JobRunnerTest, AJobStoppedBeforeItStartedIsReported) {
  jobs.OnStart(Job("job_2"), "tcp://node");
  jobs.OnStop(proto::StopJobMsg{.submission_id = "job_2"});
  auto ev = Event();
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, int(proto::JobEventKind::kFailedToStart));
  EXPECT_EQ(ev->cause, "stopped before it started");
}

TEST_F(JobRunnerTest, AWorkingDirThisHostCannotSeeIsFetchedBeforeTheExecutable) {
  auto m = Job("job_3");
  m.working_dir = "/nonexistent-submitter-folder";
  m.working_dir_hash = HashBytes("the package");
  m.working_dir_id = "another-host:1:2";
  jobs.OnStart(m, "tcp://node");
  auto asks = outbox.Sent(MsgType::kFetchBinary);
  ASSERT_EQ(asks.size(), 1u);
  auto ask = asks[0].As<proto::BinaryMsg>();
  EXPECT_TRUE(ask.package);
  EXPECT_EQ(ask.hash, m.working_dir_hash);
  jobs.OnExecutable("job_3", m.working_dir_hash, true, "the head keeps no working_dir with hash x");
  auto ev = Event();
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, int(proto::JobEventKind::kFailedToStart));
  EXPECT_NE(ev->cause.find("the job's working_dir could not be fetched"), std::string::npos)
      << ev->cause;
}

TEST_F(JobRunnerTest, AWorkingDirWithoutAPackageMustBeHere) {
  auto m = Job("job_4");
  m.working_dir = "/nonexistent-submitter-folder";
  jobs.OnStart(m, "tcp://node");
  auto ev = Event();
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, int(proto::JobEventKind::kFailedToStart));
  EXPECT_NE(ev->cause.find("/nonexistent-submitter-folder"), std::string::npos) << ev->cause;
  m.submission_id = "job_5";
  m.working_dir_hash = "not a hash";
  jobs.OnStart(m, "tcp://node");
  ev = Event();
  ASSERT_TRUE(ev);
  EXPECT_NE(ev->cause.find("SHA-256"), std::string::npos) << ev->cause;
  EXPECT_EQ(outbox.Count(MsgType::kFetchBinary), 0u);
}

}  // namespace
}  // namespace orrery::node
