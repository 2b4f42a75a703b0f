// JobManager and DriverRecords: registration, executables, heartbeats, records.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "core/internal/file_hash.h"
#include "tests/unit/scheduler/head_harness.h"

namespace orrery::scheduler {
namespace {

using proto::MsgType;
using testing::HeadHarness;

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("orrery-jobs-test-" + UniqueId::Random().Hex());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(JobManagerTest, AJobWhoseExecutableTheHeadLacksUploadsItFirst) {
  HeadHarness h(nullptr, dir_.string());
  std::string bytes = "#!/bin/true\n";
  proto::JobMsg j;
  j.job_id = JobId::Random().Binary();
  j.reply_to = "tcp://driver";
  j.entrypoint = "/bin/app";
  j.binary_hash = HashBytes(bytes);
  h.jobs.OnRegister(j, 0);
  auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->error_kind, proto::ErrorKind::kNeedBinary);
  EXPECT_FALSE(h.jobs.IsAlive(j.job_id));

  proto::BinaryMsg put{1, "tcp://driver", j.binary_hash, "", true, "", j.job_id, true};
  h.jobs.OnPutBinary(put, "something else");
  ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack);
  EXPECT_FALSE(ack->ok);
  h.jobs.OnPutBinary(put, bytes);
  ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack);
  EXPECT_TRUE(ack->ok) << ack->message;

  h.jobs.OnRegister(j, 1);
  ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack && ack->ok);
  EXPECT_TRUE(h.jobs.IsAlive(j.job_id));
  EXPECT_TRUE(h.jobs.VouchesFor(j.binary_hash));
  EXPECT_TRUE(h.jobs.CheckExecutable(j.job_id, {"/bin/app"}, j.binary_hash).ok());
  EXPECT_FALSE(h.jobs.CheckExecutable(j.job_id, {"/bin/evil"}, j.binary_hash).ok());
  EXPECT_FALSE(h.jobs.CheckExecutable(j.job_id, {"/bin/app"}, "").ok());
  EXPECT_FALSE(h.jobs.CheckExecutable(JobId::Random().Binary(), {"/bin/app"}, "").ok());

  proto::BinaryMsg fetch{2, "tcp://node", j.binary_hash, "", true, "", "", true};
  h.jobs.OnFetchBinary(fetch);
  auto reply = h.outbox->Take<proto::BinaryMsg>(MsgType::kBinaryReply, "tcp://node");
  ASSERT_TRUE(reply);
  EXPECT_TRUE(reply->ok) << reply->message;
}

TEST_F(JobManagerTest, AnUploadNoJobAskedForIsRefused) {
  HeadHarness h(nullptr, dir_.string());
  std::string bytes = "x";
  proto::BinaryMsg put{
      1, "tcp://driver", HashBytes(bytes), "", true, "", JobId::Random().Binary(), true};
  h.jobs.OnPutBinary(put, bytes);
  auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->error_kind, proto::ErrorKind::kConfigError);
  EXPECT_FALSE(std::filesystem::exists(dir_ / put.hash));
}

// Stores `bytes` as a working_dir package; whether the head acknowledged it.
bool PutPackage(HeadHarness& h, const std::string& hash, const std::string& bytes) {
  proto::BinaryMsg put{1, "tcp://driver", hash, "", true, ""};
  put.package = true;
  h.jobs.OnPutBinary(put, bytes);
  auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  return ack && ack->ok;
}

TEST_F(JobManagerTest, PackagesAreKeptWithinTheStoresSizeTheLeastRecentlyUsedGoingFirst) {
  HeadHarness h(nullptr, dir_.string());
  h.jobs.SetPackageStoreBytes(2500);
  std::string a(1000, 'a'), b(1000, 'b'), c(1000, 'c');
  ASSERT_TRUE(PutPackage(h, HashBytes(a), a));
  ASSERT_TRUE(PutPackage(h, HashBytes(b), b));
  // Asking whether the head keeps one (no bytes) marks it as used; a package it lacks is
  // asked for.
  auto old = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
  std::filesystem::last_write_time(dir_ / "working_dirs" / HashBytes(a), old);
  std::filesystem::last_write_time(dir_ / "working_dirs" / HashBytes(b),
                                   old - std::chrono::hours(1));
  EXPECT_TRUE(PutPackage(h, HashBytes(b), ""));
  proto::BinaryMsg ask{1, "tcp://driver", HashBytes(c), "", true, ""};
  ask.package = true;
  h.jobs.OnPutBinary(ask, "");
  auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack);
  EXPECT_FALSE(ack->ok);
  EXPECT_EQ(ack->error_kind, proto::ErrorKind::kNeedBinary);
  // A third goes over the store's size: the one used longest ago (a) is forgotten.
  ASSERT_TRUE(PutPackage(h, HashBytes(c), c));
  EXPECT_FALSE(h.jobs.HasPackage(HashBytes(a)));
  EXPECT_TRUE(h.jobs.HasPackage(HashBytes(b)));
  EXPECT_TRUE(h.jobs.HasPackage(HashBytes(c)));
  EXPECT_FALSE(PutPackage(h, HashBytes(a), "")) << "asked for again";
}

TEST_F(JobManagerTest, ASilentDriversJobEndsAndTakesItsActorsAlong) {
  HeadHarness h;
  h.AddNode({{"CPU", 1}});
  std::string job = h.AddJob(0);
  auto req = h.ActorRequest(job, {{"CPU", 1}});
  h.actors.OnCreate(req, 0);
  h.jobs.DriverDied(JobId::Random().Binary(), "not a job of this head");
  EXPECT_TRUE(h.jobs.IsAlive(job));
  h.jobs.DriverDied(job, "no heartbeat for 31 s");
  EXPECT_FALSE(h.jobs.IsAlive(job));
  EXPECT_TRUE(h.actors.Find(req.spec.actor_id)->kill_requested);
  EXPECT_NE(h.Table("jobs")[Hex(job)].find("the driver died: no heartbeat for 31 s"),
            std::string::npos);
}

TEST(DriverRecordsTest, KeepsRunRecordsAppendsStreamEntriesOnceAndRefusesOtherTables) {
  HeadHarness h;
  proto::RecordMsg m;
  m.request_id = 5;
  m.reply_to = "tcp://driver";
  m.table = "train_runs";
  m.key = "abc123";
  m.json = R"({"status":"RUNNING"})";
  m.stream_index = 0;
  m.stream_json = R"({"loss":"0.5"})";
  h.records.OnPutRecord(m);
  h.records.OnPutRecord(m);  // a resend appends nothing
  EXPECT_EQ(h.store->Stream("train:abc123:metrics").size(), 1u);
  EXPECT_EQ(h.Table("train_runs")["abc123"], m.json);
  EXPECT_EQ(h.outbox->Count(MsgType::kAck), 2u);
  h.outbox->Clear();
  for (auto bad : {std::pair<std::string, std::string>{"actors", "abc"},
                   {"train_runs", "xyz"},
                   {"train_runs", ""}}) {
    m.table = bad.first;
    m.key = bad.second;
    h.records.OnPutRecord(m);
    auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
    ASSERT_TRUE(ack);
    EXPECT_FALSE(ack->ok) << bad.first << "/" << bad.second;
  }
  m.table = "train_runs";
  m.key = "abc";
  m.json = "[1]";
  h.records.OnPutRecord(m);
  auto ack = h.outbox->Take<proto::AckMsg>(MsgType::kAck);
  ASSERT_TRUE(ack);
  EXPECT_FALSE(ack->ok);
}

}  // namespace
}  // namespace orrery::scheduler
