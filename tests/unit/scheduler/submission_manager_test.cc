// SubmissionManager: submitted jobs from submission to their end, and log routing.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/internal/file_hash.h"
#include "tests/unit/scheduler/head_harness.h"

namespace orrery::scheduler {
namespace {

using proto::MsgType;
using testing::HeadHarness;

class SubmissionManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("orrery-subs-test-" + UniqueId::Random().Hex());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  proto::SubmitJobMsg Request(const std::string& id = "job_0123456789abcdef") {
    proto::SubmitJobMsg m;
    m.request_id = 9;
    m.reply_to = "tcp://cli";
    m.submission_id = id;
    m.argv = {"./driver", "exit", "3"};
    m.binary_hash = HashBytes(bytes_);
    m.entrypoint = "./driver exit 3";
    return m;
  }
  // Submits `m`, uploading the executable when asked; returns the last reply.
  proto::SubmitJobReplyMsg Submit(HeadHarness& h, const proto::SubmitJobMsg& m) {
    h.submissions.OnSubmit(m, 100);
    auto reply = h.outbox->Take<proto::SubmitJobReplyMsg>(MsgType::kSubmitJobReply);
    EXPECT_TRUE(reply);
    if (reply && reply->need_binary) {
      proto::BinaryMsg put{1, "tcp://cli", m.binary_hash, "", true, "", m.submission_id, true};
      h.jobs.OnPutBinary(put, bytes_);
      auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
      EXPECT_TRUE(ack && ack->ok);
      h.submissions.OnSubmit(m, 100);
      reply = h.outbox->Take<proto::SubmitJobReplyMsg>(MsgType::kSubmitJobReply);
    }
    return reply ? *reply : proto::SubmitJobReplyMsg{};
  }
  nlohmann::json Record(HeadHarness& h, const std::string& id) {
    return nlohmann::json::parse(h.Table("submissions").at(id));
  }

  std::filesystem::path dir_;
  std::string bytes_ = "#!/bin/true\n";
};

TEST_F(SubmissionManagerTest, AJobRunsOnANodeAndEndsWithItsExitCode) {
  HeadHarness h(nullptr, dir_.string());
  std::string node = h.AddNode({{"CPU", 2}});
  h.submissions.SetHeadAddress("tcp://127.0.0.1:6380");
  auto reply = Submit(h, Request());
  EXPECT_TRUE(reply.error.empty()) << reply.error;
  EXPECT_FALSE(reply.need_binary);
  auto start = h.outbox->Take<proto::StartJobMsg>(MsgType::kStartJob);
  ASSERT_TRUE(start);
  EXPECT_EQ(start->env["ORRERY_ADDRESS"], "127.0.0.1:6380");
  EXPECT_EQ(start->env["ORRERY_SUBMISSION_ID"], "job_0123456789abcdef");
  EXPECT_TRUE(h.jobs.VouchesFor(start->binary_hash));  // nodes may fetch it
  EXPECT_EQ(Record(h, "job_0123456789abcdef")["state"], "PENDING");

  int i = h.nodes.Index(node);
  proto::JobEventMsg ev{
      int(proto::JobEventKind::kStarted), "job_0123456789abcdef", node, "", 42, 0, ""};
  h.submissions.OnJobEvent(ev, i, 101);
  EXPECT_EQ(Record(h, "job_0123456789abcdef")["state"], "RUNNING");
  ev.kind = int(proto::JobEventKind::kExited);
  ev.exit_code = 3;
  ev.cause = "its driver exited with code 3";
  h.submissions.OnJobEvent(ev, i, 102);
  auto r = Record(h, "job_0123456789abcdef");
  EXPECT_EQ(r["state"], "FAILED");
  EXPECT_EQ(r["exit_code"], 3);
  EXPECT_EQ(r["end_time"], 102);
  // A second report changes nothing.
  ev.exit_code = 0;
  h.submissions.OnJobEvent(ev, i, 103);
  EXPECT_EQ(Record(h, "job_0123456789abcdef")["exit_code"], 3);
}

// A kStartJob sent as the head stops dies with it: the head sends it again every
// kStartResendS until the node reports the job started (the node ignores a start of a job
// it runs or ran), and never once it has.
TEST_F(SubmissionManagerTest, AStartIsSentAgainUntilTheNodeReportsTheJobStarted) {
  HeadHarness h(nullptr, dir_.string());
  std::string node = h.AddNode({{"CPU", 2}});
  Submit(h, Request());  // at 100
  auto first = h.outbox->Take<proto::StartJobMsg>(MsgType::kStartJob);
  ASSERT_TRUE(first);
  h.submissions.Tick(100 + SubmissionManager::kStartResendS / 2);
  EXPECT_FALSE(h.outbox->Take<proto::StartJobMsg>(MsgType::kStartJob)) << "sent again too soon";
  h.submissions.Tick(100 + SubmissionManager::kStartResendS);
  auto again = h.outbox->Take<proto::StartJobMsg>(MsgType::kStartJob, h.nodes.address(0));
  ASSERT_TRUE(again) << "not sent again";
  EXPECT_EQ(again->submission_id, first->submission_id);
  EXPECT_EQ(again->argv, first->argv);
  EXPECT_EQ(Record(h, "job_0123456789abcdef")["state"], "PENDING");

  proto::JobEventMsg ev{
      int(proto::JobEventKind::kStarted), "job_0123456789abcdef", node, "", 42, 0, ""};
  h.submissions.OnJobEvent(ev, h.nodes.Index(node), 103);
  h.submissions.Tick(200);
  EXPECT_FALSE(h.outbox->Take<proto::StartJobMsg>(MsgType::kStartJob)) << "sent once started";
}

TEST_F(SubmissionManagerTest, AWorkingDirPackageIsAskedForStoredAndServedToNodes) {
  HeadHarness h(nullptr, dir_.string());
  std::string node = h.AddNode({{"CPU", 2}});
  std::string package = "a packed folder";
  auto m = Request();
  m.runtime_env.working_dir = "/home/user/project";
  m.runtime_env.working_dir_hash = HashBytes(package);
  m.runtime_env.working_dir_id = "boot:1:2";
  h.submissions.OnSubmit(m, 100);
  auto reply = h.outbox->Take<proto::SubmitJobReplyMsg>(MsgType::kSubmitJobReply);
  ASSERT_TRUE(reply);
  EXPECT_TRUE(reply->need_binary);
  EXPECT_TRUE(reply->need_package);
  proto::BinaryMsg put{1,  "tcp://cli",    m.runtime_env.working_dir_hash, "", true,
                       "", m.submission_id};
  put.package = true;
  h.jobs.OnPutBinary(put, "other bytes");  // not what it is named by: refused
  auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack);
  EXPECT_FALSE(ack->ok);
  EXPECT_FALSE(h.jobs.HasPackage(put.hash));
  h.jobs.OnPutBinary(put, package);
  ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack && ack->ok) << (ack ? ack->message : "");
  EXPECT_FALSE(h.jobs.VouchesFor(put.hash)) << "a package is never run as an executable";
  EXPECT_TRUE(Submit(h, m).error.empty());
  auto start = h.outbox->Take<proto::StartJobMsg>(MsgType::kStartJob);
  ASSERT_TRUE(start);
  EXPECT_EQ(start->working_dir, "/home/user/project");
  EXPECT_EQ(start->working_dir_hash, m.runtime_env.working_dir_hash);
  EXPECT_EQ(start->working_dir_id, "boot:1:2");
  // A node asks for it by hash and gets its bytes.
  proto::BinaryMsg fetch{7, "tcp://node", put.hash, "", true, ""};
  fetch.package = true;
  h.jobs.OnFetchBinary(fetch);
  ASSERT_FALSE(h.outbox->Sent(MsgType::kBinaryReply).empty());
  EXPECT_EQ(h.outbox->Sent(MsgType::kBinaryReply).back().payload, package);
  auto served = h.outbox->Take<proto::BinaryMsg>(MsgType::kBinaryReply, "tcp://node");
  ASSERT_TRUE(served);
  EXPECT_TRUE(served->ok);
  EXPECT_TRUE(served->package);
  fetch.hash = HashBytes("never uploaded");
  h.jobs.OnFetchBinary(fetch);
  served = h.outbox->Take<proto::BinaryMsg>(MsgType::kBinaryReply, "tcp://node");
  ASSERT_TRUE(served);
  EXPECT_FALSE(served->ok);
}

TEST_F(SubmissionManagerTest, BadSubmissionsAreRefusedWithAReason) {
  HeadHarness h(nullptr, dir_.string());
  h.AddNode({{"CPU", 2}});
  auto bad_id = Request("../etc");
  EXPECT_FALSE(Submit(h, bad_id).error.empty());
  auto no_argv = Request();
  no_argv.argv.clear();
  EXPECT_FALSE(Submit(h, no_argv).error.empty());
  auto bad_hash = Request();
  bad_hash.binary_hash = "xyz";
  EXPECT_FALSE(Submit(h, bad_hash).error.empty());
  auto negative = Request();
  negative.resources = {{"CPU", -1}};
  EXPECT_FALSE(Submit(h, negative).error.empty());
  auto too_big = Request();
  too_big.resources = {{"GPU", 8}};
  std::string error = Submit(h, too_big).error;
  EXPECT_NE(error.find("can never run"), std::string::npos) << error;
  EXPECT_TRUE(h.Table("submissions").empty());
  EXPECT_EQ(h.outbox->Count(MsgType::kStartJob), 0u);
}

TEST_F(SubmissionManagerTest, OnlyItsOwnNodeReportsAndANodeDeathFailsTheJob) {
  HeadHarness h(nullptr, dir_.string());
  std::string a = h.AddNode({{"CPU", 1}}, {{"pool", "a"}});
  std::string b = h.AddNode({{"CPU", 1}}, {{"pool", "b"}});
  auto m = Request();
  m.label_selector = {{"pool", "b"}};
  m.resources = {{"CPU", 1}};
  ASSERT_TRUE(Submit(h, m).error.empty());
  auto start = h.outbox->Take<proto::StartJobMsg>(MsgType::kStartJob);
  ASSERT_TRUE(start);
  int ib = h.nodes.Index(b), ia = h.nodes.Index(a);
  EXPECT_EQ(h.nodes.available(ib).at("CPU"), 0);  // reserved for the driver
  proto::JobEventMsg ev{int(proto::JobEventKind::kExited), m.submission_id, a, "", 1, 0, ""};
  h.submissions.OnJobEvent(ev, ia, 101);  // node a does not run it
  EXPECT_EQ(Record(h, m.submission_id)["state"], "PENDING");
  h.m.NodeDied(ib, "it stopped sending heartbeats", 0);
  auto r = Record(h, m.submission_id);
  EXPECT_EQ(r["state"], "FAILED");
  EXPECT_NE(r["message"].get<std::string>().find("died"), std::string::npos);
}

TEST_F(SubmissionManagerTest, StopEndsAPendingJobAndAsksTheNodeForARunningOne) {
  HeadHarness h(nullptr, dir_.string());
  std::string node = h.AddNode({{"CPU", 1}});
  auto m = Request();
  ASSERT_TRUE(Submit(h, m).error.empty());
  ASSERT_TRUE(h.outbox->Take<proto::StartJobMsg>(MsgType::kStartJob));
  h.submissions.OnStop({3, "tcp://cli", m.submission_id}, 101);
  auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack && ack->ok);
  ASSERT_TRUE(h.outbox->Take<proto::StopJobMsg>(MsgType::kStopJob));
  proto::JobEventMsg ev{int(proto::JobEventKind::kExited), m.submission_id, node, "", 1, 143, ""};
  h.submissions.OnJobEvent(ev, h.nodes.Index(node), 102);
  EXPECT_EQ(Record(h, m.submission_id)["state"], "STOPPED");
  h.submissions.OnStop({4, "tcp://cli", "job_ffff"}, 103);
  ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack);
  EXPECT_FALSE(ack->ok);
}

TEST_F(SubmissionManagerTest, LogLinesAreStoredEscapedAndPassedToTheirDriver) {
  HeadHarness h(nullptr, dir_.string());
  std::string node = h.AddNode({{"CPU", 1}});
  proto::JobMsg j;
  j.job_id = JobId::Random().Binary();
  j.entrypoint = "/bin/app";
  j.reply_to = "tcp://driver";
  j.driver_address = "tcp://driver";
  h.jobs.OnRegister(j, 0);
  std::string job = j.job_id;
  proto::LogBatchMsg batch;
  batch.node_id = NodeId(UniqueId::FromBinary(node)).Hex();
  proto::LogLinesMsg g;
  g.job_id = Hex(job);
  g.actor_id = "not an id";
  g.name = "Counter\x1b[2J";
  g.pid = 7;
  g.lines = {"hello", "clear\x1b[2Jscreen"};
  batch.groups.push_back(g);
  proto::LogLinesMsg stranger = g;
  stranger.submission_id = "job_unknown";  // a submission this head never had: dropped
  batch.groups.push_back(stranger);
  h.submissions.OnLogBatch(batch, h.nodes.Index(node));
  auto forwarded = h.outbox->Take<proto::LogBatchMsg>(MsgType::kLogBatch, "tcp://driver");
  ASSERT_TRUE(forwarded);
  ASSERT_EQ(forwarded->groups.size(), 1u);
  EXPECT_EQ(forwarded->groups[0].lines[1], "clear\\x1b[2Jscreen");
  EXPECT_EQ(forwarded->groups[0].name, "Counter\\x1b[2J");
  EXPECT_EQ(forwarded->groups[0].actor_id, "");
  auto entries = h.store->Stream("logs");
  ASSERT_EQ(entries.size(), 1u);
  std::map<std::string, std::string> fields(entries[0].begin(), entries[0].end());
  EXPECT_EQ(fields["text"], "hello\nclear\\x1b[2Jscreen");
  EXPECT_EQ(fields["job"], Hex(job));
  EXPECT_TRUE(h.store->Stream("job_logs:job_unknown").empty());
}

TEST_F(SubmissionManagerTest, ARestartedHeadKeepsItsSubmissions) {
  auto store = std::make_shared<InMemoryStateStore>();
  std::string node;
  {
    HeadHarness h(store, dir_.string());
    node = h.AddNode({{"CPU", 2}});
    ASSERT_TRUE(Submit(h, Request()).error.empty());
  }
  HeadHarness h2(store, dir_.string());
  h2.Restore(0);
  EXPECT_TRUE(h2.jobs.VouchesFor(HashBytes(bytes_)));
  h2.submissions.OnStop({3, "tcp://cli", "job_0123456789abcdef"}, 101);
  auto ack = h2.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack);
  EXPECT_TRUE(ack->ok) << ack->message;
}

}  // namespace
}  // namespace orrery::scheduler
