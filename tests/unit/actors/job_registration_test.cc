// JobRegistration: a job the head cannot run yet (NeedBinary) uploads this program's
// executable and registers again; a refusal throws the head's error kind; heartbeats go
// once a second; the end of the job is sent once. The head is the fake outbox's hook.
#include "actors/src/job_registration.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include "core/internal/file_hash.h"
#include "orrery/errors.h"
#include "tests/fakes/recording_outbox.h"

namespace orrery::runtime {
namespace {

using ::orrery::testing::SentMessage;
using proto::MsgType;

class JobRegistrationTest : public ::testing::Test {
 protected:
  JobRegistrationTest() : head_(outbox_, "tcp://head", 2), job_(self_, config_, head_) {
    self_.address = "tcp://me";
    self_.job = JobId::Random();
    self_.argv = {"/proc/self/exe"};
    config_.address = "tcp://head";  // a cluster: the executable is named by its hash
    head_.SetReplyTo(self_.address);
  }

  // The head answers kRegisterJob with `register_answers` in turn (then ok), and stores
  // executables.
  void HeadAnswers(std::vector<proto::AckMsg> register_answers) {
    outbox_.on_send = [this, register_answers](const SentMessage& m) {
      if (m.type != MsgType::kRegisterJob && m.type != MsgType::kPutBinary) return Status::Ok();
      proto::AckMsg ack;
      if (m.type == MsgType::kRegisterJob && registers_ < register_answers.size())
        ack = register_answers[registers_];
      if (m.type == MsgType::kRegisterJob) ++registers_;
      ack.request_id = m.RequestId();
      auto env = ::orrery::testing::MakeEnvelope(MsgType::kAck, ack);
      head_.Complete(env);
      return Status::Ok();
    };
  }

  ProcessIdentity self_;
  Config config_;
  ::orrery::testing::RecordingOutbox outbox_;
  HeadClient head_;
  JobRegistration job_;
  size_t registers_ = 0;
};

TEST_F(JobRegistrationTest, UploadsTheExecutableWhenTheHeadNeedsIt) {
  HeadAnswers({proto::AckMsg{0, false, proto::ErrorKind::kNeedBinary, "send it"}});
  job_.Register();
  EXPECT_TRUE(job_.registered());
  std::string hash = HashFile("/proc/self/exe");
  EXPECT_EQ(self_.binary_hash, hash);
  auto registers = outbox_.Sent(MsgType::kRegisterJob);
  ASSERT_EQ(registers.size(), 2u);
  EXPECT_EQ(registers[1].As<proto::JobMsg>().binary_hash, hash);
  EXPECT_TRUE(registers[1].As<proto::JobMsg>().alive);
  auto puts = outbox_.Sent(MsgType::kPutBinary);
  ASSERT_EQ(puts.size(), 1u);
  EXPECT_EQ(puts[0].As<proto::BinaryMsg>().hash, hash);
  EXPECT_EQ(puts[0].As<proto::BinaryMsg>().job_id, self_.job.Binary());
  std::ifstream in("/proc/self/exe", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(puts[0].payload.has_value());
  EXPECT_EQ(puts[0].payload->size(), bytes.size());
}

TEST_F(JobRegistrationTest, ARefusalThrowsTheHeadsErrorKind) {
  HeadAnswers({proto::AckMsg{0, false, proto::ErrorKind::kConfigError, "bad namespace"}});
  EXPECT_THROW(job_.Register(), ConfigError);
  EXPECT_FALSE(job_.registered());
}

// The heartbeats leave from a thread of their own, once a second, with no tick driving
// them (a busy inbox cannot hold them up), and stop with the end of the job.
TEST_F(JobRegistrationTest, HeartbeatsFromTheirOwnThreadOnceASecondWhileRegistered) {
  HeadAnswers({});
  job_.Register();
  outbox_.Clear();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (outbox_.Sent(MsgType::kRegisterJob).size() < 2 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto beats = outbox_.Sent(MsgType::kRegisterJob);
  ASSERT_GE(beats.size(), 2u) << "no heartbeats within 10 s";
  EXPECT_TRUE(beats[0].As<proto::JobMsg>().alive);
  EXPECT_EQ(beats[0].As<proto::JobMsg>().binary_hash, self_.binary_hash);
  job_.End(100);
  size_t sent = outbox_.Sent(MsgType::kRegisterJob).size();
  EXPECT_FALSE(outbox_.Sent(MsgType::kRegisterJob).back().As<proto::JobMsg>().alive);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // a negative check
  EXPECT_EQ(outbox_.Sent(MsgType::kRegisterJob).size(), sent) << "a heartbeat after the end";
}

TEST_F(JobRegistrationTest, TheEndIsSentOnce) {
  HeadAnswers({});
  job_.Register();
  outbox_.Clear();
  job_.End(1000);
  job_.End(1000);
  size_t ends = 0;  // a heartbeat may have left before the end: only goodbyes count
  for (const auto& m : outbox_.Sent(MsgType::kRegisterJob))
    ends += m.As<proto::JobMsg>().alive ? 0 : 1;
  EXPECT_EQ(ends, 1u);
  EXPECT_FALSE(job_.registered());
}

}  // namespace
}  // namespace orrery::runtime
