// LogMonitor against a flood: a writer (a thread, through its own O_APPEND descriptor as a
// process's stdout) writes a quarter of a gigabyte of lines to its stdout
// file while the monitor reads. What the monitor holds stays bounded, the file is rotated
// while the writer still writes, every line is either forwarded or counted in a note, and
// the child's last line is forwarded (docs/logs.md "Rotation and limits").
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "node/src/log_monitor.h"
#include "orrery/ids.h"
#include "tests/fakes/recording_outbox.h"
#include "tests/sanitizers.h"

namespace orrery::node {
using orrery_test::kSanitized;

namespace {

constexpr uint64_t kLineBytes = 100;  // "line 00000042 xxx...\n"
constexpr uint64_t kRoundBytes = 4 << 20;
constexpr int kLockstepRounds = 40;         // 160 MiB read while the child waits on the test
constexpr uint64_t kFinalBytes = 96 << 20;  // then written at once before the child exits
constexpr uint64_t kRotateBytes = 16 << 20;
constexpr int64_t kRssBudget = 64 << 20;

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM": the peak since ResetPeak).
int64_t StatusBytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  return -1;
}

// Starts VmHWM again from the current resident memory (proc(5), /proc/PID/clear_refs).
bool ResetPeak() { return bool(std::ofstream("/proc/self/clear_refs") << "5"); }

// Writes `bytes` of numbered lines of kLineBytes each to `fd`, from line *next on.
bool WriteLines(int fd, uint64_t bytes, uint64_t* next) {
  std::string buf;
  for (uint64_t done = 0; done < bytes; done += kLineBytes) {
    char head[32];
    std::snprintf(head, sizeof(head), "line %08llu ", static_cast<unsigned long long>((*next)++));
    buf += head;
    buf.append(kLineBytes - 1 - std::string(head).size(), 'x');
    buf.push_back('\n');
    if (buf.size() >= (1 << 20)) {
      if (write(fd, buf.data(), buf.size()) != ssize_t(buf.size())) return false;
      buf.clear();
    }
  }
  return buf.empty() || write(fd, buf.data(), buf.size()) == ssize_t(buf.size());
}

// The writer: kLockstepRounds rounds of kRoundBytes, each announced on `ready` and waited
// on through `go` (a failure closes `ready` early); then kFinalBytes and its last line.
bool Flood(const std::string& out_path, int ready, int go) {
  int fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  bool ok = fd >= 0;
  uint64_t next = 0;
  char c = 0;
  for (int round = 0; ok && round < kLockstepRounds; ++round) {
    ok = WriteLines(fd, kRoundBytes, &next) && write(ready, "r", 1) == 1 && read(go, &c, 1) == 1;
  }
  close(ready);
  ok = ok && WriteLines(fd, kFinalBytes, &next);
  const char last[] = "the last line\n";
  ok = ok && write(fd, last, sizeof(last) - 1) == ssize_t(sizeof(last) - 1);
  if (fd >= 0) close(fd);
  return ok;
}

TEST(LogMonitorFloodTest, MemoryIsBoundedTheFileRotatesWhileWrittenAndDropsAreCounted) {
  auto dir = std::filesystem::temp_directory_path() / ("orrery-flood-" + UniqueId::Random().Hex());
  std::filesystem::create_directories(dir);
  std::string stem = (dir / "job-flood").string();
  ::orrery::testing::RecordingOutbox outbox;
  LogMonitorOptions o;
  o.head_address = "tcp://head";
  o.rotate_bytes = kRotateBytes;
  o.rotate_backups = 2;
  o.forward_bytes_per_s = 64 << 10;
  ASSERT_TRUE(ResetPeak());
  int64_t base = StatusBytes("VmRSS");
  LogMonitor m(o, outbox);
  int ready[2], go[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  const int pid = 4242;
  bool wrote = false;
  std::thread writer([&] { wrote = Flood(stem + ".out", ready[1], go[0]); });
  m.Watch(pid, stem, {});
  uint64_t largest = 0;
  bool rotated_while_running = false;
  char c = 0;
  for (int round = 0; round < kLockstepRounds && read(ready[0], &c, 1) == 1; ++round) {
    m.Flush();
    largest = std::max<uint64_t>(largest, std::filesystem::file_size(stem + ".out"));
    rotated_while_running |= std::filesystem::exists(stem + ".out.1");
    if (write(go[1], "g", 1) != 1) break;
  }
  writer.join();
  ASSERT_TRUE(wrote) << "the writer failed";
  m.Finish(pid);
  m.Flush();
  int64_t peak = StatusBytes("VmHWM");

  uint64_t forwarded = 0, dropped = 0;
  std::string last;
  std::regex note(R"(\[orrery\] (\d+) line\(s\) of stdout not forwarded .*)");
  for (const auto& sent : outbox.Sent(proto::MsgType::kLogBatch)) {
    for (const auto& g : sent.As<proto::LogBatchMsg>().groups) {
      for (const auto& l : g.lines) {
        std::smatch match;
        if (g.is_stderr && std::regex_match(l, match, note)) {
          dropped += std::stoull(match[1]);
        } else if (!g.is_stderr) {
          ++forwarded;
          last = l;
        }
      }
    }
  }
  auto lines_in = [](uint64_t bytes) { return (bytes + kLineBytes - 1) / kLineBytes; };
  uint64_t written = kLockstepRounds * lines_in(kRoundBytes) + lines_in(kFinalBytes) + 1;
  EXPECT_EQ(forwarded + dropped, written) << forwarded << " forwarded, " << dropped << " dropped";
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(last, "the last line");
  EXPECT_TRUE(rotated_while_running);
  EXPECT_LE(largest, kRotateBytes + kRoundBytes + 4096);
  // Under a sanitizer the process's peak says nothing of the monitor (ASan keeps freed
  // memory in quarantine, TSan shadows it): the bound is checked in the plain build.
  if (!kSanitized) {
    EXPECT_LT(peak - base, kRssBudget) << "the monitor held " << (peak - base) << " bytes";
  }
  for (int fd : {ready[0], go[0], go[1]}) close(fd);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace orrery::node
