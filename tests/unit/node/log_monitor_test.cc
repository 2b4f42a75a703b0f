// LogMonitor: files tailed into batches for the head, lines cut and escaped, rotation, and
// the per-process rate limit. The "head" is an inbox of the test's.
#include "node/src/log_monitor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>

#include "core/internal/transport.h"
#include "orrery/ids.h"
#include "tests/fakes/recording_outbox.h"

namespace orrery::node {
namespace {

TEST(LogMonitorSplitTest, LinesAreCutEscapedAndKeptWhenUnfinished) {
  std::string pending;
  std::vector<std::string> lines;
  LogMonitor::SplitLines("one\ntwo\r\nthr", false, &pending, &lines);
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(pending, "thr");
  LogMonitor::SplitLines("ee\n\x1b[31mred\n", false, &pending, &lines);
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "three", "\\x1b[31mred"}));
  EXPECT_TRUE(pending.empty());
  LogMonitor::SplitLines("tail", true, &pending, &lines);
  EXPECT_EQ(lines.back(), "tail");
  lines.clear();
  LogMonitor::SplitLines(std::string(LogMonitor::kMaxLineBytes * 2 + 5, 'x'), true, &pending,
                         &lines);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].size(), LogMonitor::kMaxLineBytes);
  EXPECT_EQ(lines[2], "xxxxx");
}

// Receives the monitor's batches.
class FakeHead {
 public:
  FakeHead() {
    EXPECT_TRUE(inbox_.Bind("127.0.0.1").ok());
    inbox_.Start([this](transport::Envelope& env) {
      if (env.type != proto::MsgType::kLogBatch) return;
      proto::LogBatchMsg b;
      ASSERT_TRUE(env.Decode(&b).ok());
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& g : b.groups) groups_.push_back(g);
      node_secret_ = b.node_secret;
      cv_.notify_all();
    });
  }
  ~FakeHead() { inbox_.Stop(); }
  const std::string& address() const { return inbox_.address(); }
  // The lines received for `pid` on stdout or stderr, once at least `n` came (10 s at most).
  std::vector<std::string> Lines(int pid, bool err, size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    std::vector<std::string> out;
    cv_.wait_for(lock, std::chrono::seconds(10), [&] {
      out.clear();
      for (const auto& g : groups_)
        if (g.pid == pid && g.is_stderr == err)
          out.insert(out.end(), g.lines.begin(), g.lines.end());
      return out.size() >= n;
    });
    return out;
  }
  std::vector<proto::LogLinesMsg> Groups() {
    std::lock_guard<std::mutex> lock(mu_);
    return groups_;
  }

 private:
  transport::Inbox inbox_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<proto::LogLinesMsg> groups_;
  std::string node_secret_;
};

class LogMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("orrery-logs-test-" + UniqueId::Random().Hex());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    transport::CloseThreadSockets();
  }
  void Append(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::app) << text;
  }
  std::filesystem::path dir_;
};

TEST_F(LogMonitorTest, NewLinesOfBothFilesReachTheHeadWithTheirSource) {
  FakeHead head;
  LogMonitorOptions o;
  o.head_address = head.address();
  o.node_id = "ab12cd";
  LogMonitor m(o);
  m.Start();
  std::string stem = (dir_ / "worker-4242").string();
  proto::LogLinesMsg source;
  source.name = "Counter";
  source.job_id = std::string(32, 'a');
  m.Watch(4242, stem, source);
  Append(stem + ".out", "first\nsecond\n");
  Append(stem + ".err", "oops\n");
  EXPECT_EQ(head.Lines(4242, false, 2), (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(head.Lines(4242, true, 1), (std::vector<std::string>{"oops"}));
  source.name = "task";
  m.Describe(4242, source);
  Append(stem + ".out", "unfinished");
  m.Finish(4242);  // read to the end once more: the unfinished line counts
  EXPECT_EQ(head.Lines(4242, false, 3).back(), "unfinished");
  for (const auto& g : head.Groups()) EXPECT_EQ(g.job_id, std::string(32, 'a'));
  m.Stop();
}

TEST_F(LogMonitorTest, AFileAboveItsLimitIsRotated) {
  LogMonitorOptions o;  // no head: lines are read and dropped
  o.rotate_bytes = 1000;
  o.rotate_backups = 2;
  LogMonitor m(o);
  std::string stem = (dir_ / "worker-7").string();
  m.Watch(7, stem, {});
  for (int round = 0; round < 3; ++round) {
    Append(stem + ".out", std::string(1500, char('a' + round)) + "\n");
    m.Flush();
    EXPECT_EQ(std::filesystem::file_size(stem + ".out"), 0u);
  }
  std::ifstream one(stem + ".out.1"), two(stem + ".out.2");
  std::string newest, older;
  std::getline(one, newest);
  std::getline(two, older);
  EXPECT_EQ(newest, std::string(1500, 'c'));
  EXPECT_EQ(older, std::string(1500, 'b'));
  EXPECT_FALSE(std::filesystem::exists(stem + ".out.3"));
}

TEST_F(LogMonitorTest, AChattyProcessIsLimitedButItsFileKeepsEverything) {
  FakeHead head;
  LogMonitorOptions o;
  o.head_address = head.address();
  o.forward_bytes_per_s = 200;
  LogMonitor m(o);
  std::string stem = (dir_ / "worker-9").string();
  m.Watch(9, stem, {});
  std::string text;
  for (int i = 0; i < 100; ++i) text += "line number " + std::to_string(i) + "\n";
  Append(stem + ".out", text);
  m.Flush();
  auto got = head.Lines(9, false, 1);
  EXPECT_GE(got.size(), 1u);
  EXPECT_LT(got.size(), 100u);
  EXPECT_EQ(std::filesystem::file_size(stem + ".out"), text.size());
}

// Past the limit, lines are dropped from the middle: when the process ends, its held tail
// and a note counting exactly what was dropped go out at once, note first, whatever the
// limit; the last line always arrives.
TEST_F(LogMonitorTest, TheTailAndTheExactCountOfDroppedLinesGoOutWhenTheProcessEnds) {
  ::orrery::testing::RecordingOutbox outbox;
  LogMonitorOptions o;
  o.head_address = "tcp://head";
  o.forward_bytes_per_s = 200;
  LogMonitor m(o, outbox);
  std::string stem = (dir_ / "job-x").string();
  m.Watch(5, stem, {});
  const int kLines = 20000;  // about 300 KB: far past 200 B/s and the 32 KiB tail
  std::string text;
  for (int i = 0; i < kLines; ++i) text += "line number " + std::to_string(i) + "\n";
  Append(stem + ".out", text);
  m.Flush();
  Append(stem + ".out", "the last line");  // unfinished: the end of the file ends it
  m.Finish(5);
  m.Flush();
  std::vector<std::string> out;
  uint64_t dropped = 0;
  size_t last_note_at = 0;
  for (const auto& sent : outbox.Sent(proto::MsgType::kLogBatch)) {
    for (const auto& g : sent.As<proto::LogBatchMsg>().groups) {
      for (const auto& l : g.lines) {
        if (!g.is_stderr) {
          out.push_back(l);
          continue;
        }
        ASSERT_EQ(l.rfind("[orrery] ", 0), 0u) << l;
        EXPECT_NE(l.find(" line(s) of stdout not forwarded"), std::string::npos) << l;
        dropped += std::stoull(l.substr(9));
        last_note_at = out.size();
      }
    }
  }
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back(), "the last line");
  EXPECT_EQ(out.size() + dropped, size_t(kLines) + 1);
  EXPECT_GT(dropped, 0u);
  // The tail after the last note is the newest lines, in order, up to the last.
  EXPECT_GT(out.size() - last_note_at, 100u);
  EXPECT_EQ(out[out.size() - 2], "line number " + std::to_string(kLines - 1));
  EXPECT_EQ(std::filesystem::file_size(stem + ".out"), text.size() + 13);
}

// The node's inbox thread calls Watch, Describe and Finish: they must not wait for a read of
// the disk in progress (a slow disk, a file on a hung network mount) on the monitor's
// thread. The read here blocks in a hook until the test lets it go.
TEST_F(LogMonitorTest, WatchReturnsWhileAReadIsInProgress) {
  std::mutex mu;
  std::condition_variable cv;
  bool reading = false, release = false;
  LogMonitorOptions o;  // no head: lines are read and dropped
  o.before_read = [&](const std::string&) {
    std::unique_lock<std::mutex> lock(mu);
    reading = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  };
  LogMonitor m(o);
  std::string stem = (dir_ / "worker-1").string();
  Append(stem + ".out", "line\n");
  m.Watch(1, stem, {});
  auto reader = std::async(std::launch::async, [&] { m.Flush(); });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return reading; }));
  }
  auto watch = std::async(std::launch::async, [&] {
    m.Watch(2, (dir_ / "worker-2").string(), {});
    m.Describe(1, {});
    m.Finish(1);
  });
  bool returned = watch.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  reader.get();
  watch.get();
  EXPECT_TRUE(returned) << "Watch waited for a read of the disk";
}

// Batches go through the Outbox given, with the node's id and secret.
TEST_F(LogMonitorTest, BatchesGoThroughTheOutbox) {
  ::orrery::testing::RecordingOutbox outbox;
  LogMonitorOptions o;
  o.head_address = "tcp://head";
  o.node_id = "ab12cd";
  o.node_secret = "s3cret";
  LogMonitor m(o, outbox);
  std::string stem = (dir_ / "worker-9").string();
  m.Watch(9, stem, {});
  Append(stem + ".err", "boom\n");
  m.Finish(9);
  m.Flush();
  auto batch = outbox.Take<proto::LogBatchMsg>(proto::MsgType::kLogBatch, "tcp://head");
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->node_id, "ab12cd");
  EXPECT_EQ(batch->node_secret, "s3cret");
  ASSERT_EQ(batch->groups.size(), 1u);
  EXPECT_EQ(batch->groups[0].pid, 9);
  EXPECT_TRUE(batch->groups[0].is_stderr);
  EXPECT_EQ(batch->groups[0].lines, std::vector<std::string>{"boom"});
}

}  // namespace
}  // namespace orrery::node
