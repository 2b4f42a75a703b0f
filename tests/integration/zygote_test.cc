// The node's worker zygotes: a killed zygote takes its workers with it, those actors die or
// restart with a cause that names it, the node stops polling it (no busy loop) and starts a
// new one; an executable replaced at the same path gets a new zygote that runs the new code.
#include <dirent.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actors/internal/test_hooks.h"
#include "core/internal/security.h"
#include "remote_functions.h"
#include "test_support.h"

extern char** environ;

namespace {

using orrery_test::kGetTimeoutMs;
using ::testing::HasSubstr;

// Field `index` (1-based, as in proc(5)) of /proc/<pid>/stat or a task's stat file.
long long StatField(const std::string& stat_path, int index) {
  std::ifstream in(stat_path);
  std::string line;
  if (!std::getline(in, line)) return -1;
  auto close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  for (int i = 3; rest >> field; ++i)
    if (i == index) return std::stoll(field);
  return -1;
}

pid_t ParentOf(pid_t pid) { return pid_t(StatField("/proc/" + std::to_string(pid) + "/stat", 4)); }

// CPU seconds (user + system) spent so far by this process's threads named `name`.
double ThreadCpuSeconds(const std::string& name) {
  double ticks = 0;
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return -1;
  while (dirent* d = readdir(dir)) {
    if (d->d_name[0] == '.') continue;
    std::string base = std::string("/proc/self/task/") + d->d_name;
    std::string comm;
    std::getline(std::ifstream(base + "/comm"), comm);
    if (comm != name) continue;
    ticks += double(StatField(base + "/stat", 14) + StatField(base + "/stat", 15));
  }
  closedir(dir);
  return ticks / double(sysconf(_SC_CLK_TCK));
}

// Either the value, or ActorDiedError naming the zygote: never a hang.
void ExpectValueOrZygoteDeath(orrery::ObjectRef<int> ref, const char* what) {
  try {
    orrery::Get(ref, kGetTimeoutMs);
  } catch (const orrery::ActorDiedError& e) {
    EXPECT_THAT(e.what(), HasSubstr("zygote")) << what;
  }
}

TEST(ZygoteTest, KilledZygoteIsForgottenItsActorsDieOrRestartAndANewOneStarts) {
  orrery_test::ActorReaper reaper;
  auto once = reaper.Add(orrery::Actor(Counter::Create).Remote(0));
  // Calls sent while it restarts are sent again to its next incarnation.
  auto restartable =
      reaper.Add(orrery::Actor(Counter::Create).SetMaxRestarts(1).SetMaxTaskRetries(1).Remote(0));
  int once_pid = *orrery::Get(once.Task(&Counter::Pid).Remote(), kGetTimeoutMs);
  int restartable_pid = *orrery::Get(restartable.Task(&Counter::Pid).Remote(), kGetTimeoutMs);
  pid_t zygote = ParentOf(once_pid);
  ASSERT_GT(zygote, 1);
  ASSERT_EQ(ParentOf(restartable_pid), zygote);

  // Requests that reach the stopped zygote stay unanswered until it dies.
  ASSERT_EQ(kill(zygote, SIGSTOP), 0);
  auto pending = reaper.Add(orrery::Actor(Counter::Create).Remote(0));
  auto pending_restartable =
      reaper.Add(orrery::Actor(Counter::Create).SetMaxRestarts(1).SetMaxTaskRetries(1).Remote(0));
  auto pending_call = pending.Task(&Counter::Inc).Remote(1);
  auto pending_restartable_call = pending_restartable.Task(&Counter::Inc).Remote(1);
  ASSERT_EQ(kill(zygote, SIGKILL), 0);
  // Its workers die with it (PR_SET_PDEATHSIG); calls from now on find them gone.
  ASSERT_TRUE(orrery_test::WaitFor([&] {
    return orrery_test::ProcessGone(once_pid) && orrery_test::ProcessGone(restartable_pid);
  }));

  try {
    orrery::Get(once.Task(&Counter::Inc).Remote(1), kGetTimeoutMs);
    ADD_FAILURE() << "an actor whose zygote was killed answered";
  } catch (const orrery::ActorDiedError& e) {
    EXPECT_THAT(e.what(), HasSubstr("zygote"));
  }
  EXPECT_EQ(*orrery::Get(restartable.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 1)
      << "restarted with fresh state";
  int new_pid = *orrery::Get(restartable.Task(&Counter::Pid).Remote(), kGetTimeoutMs);
  EXPECT_NE(ParentOf(new_pid), zygote);
  ExpectValueOrZygoteDeath(pending_call, "a pending actor without restarts");
  EXPECT_EQ(*orrery::Get(pending_restartable_call, kGetTimeoutMs), 1);

  auto fresh = reaper.Add(orrery::Actor(Counter::Create).Remote(41));
  EXPECT_EQ(*orrery::Get(fresh.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 42);

  // A dead zygote's socket left in the poll set makes the node's thread spin on its EOF.
  // A bound on work, not on speed: idle for 2 s, the node does far less than 0.5 s of it.
  double before = ThreadCpuSeconds("orrery-node");
  ASSERT_GE(before, 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_LT(ThreadCpuSeconds("orrery-node") - before, 0.5)
      << "the node's thread keeps working while idle";
}

// Runs `path` with `args`; returns its standard output (empty after 120 s).
std::string RunDriver(const std::string& path, const std::string& arg) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  std::string p = path, a = arg;
  char* argv[] = {p.data(), a.data(), nullptr};
  // The driver joins this process's embedded cluster with its token (docs/security.md).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    if (std::string(*e).rfind("ORRERY_TOKEN_FILE=", 0) != 0) env_strings.push_back(*e);
  }
  env_strings.push_back("ORRERY_TOKEN_FILE=" + orrery::security::ProcessCredentials().source);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, p.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  std::string out;
  if (rc == 0) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    char buf[256];
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd pfd{fds[0], POLLIN, 0};
      if (poll(&pfd, 1, 1000) <= 0) continue;
      ssize_t n = read(fds[0], buf, sizeof(buf));
      if (n <= 0) break;
      out.append(buf, size_t(n));
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  close(fds[0]);
  return out;
}

// Copies `from` to `to` the way a build replaces its output: a new file renamed over the
// old one (a running executable cannot be written in place).
void Replace(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to + ".new", std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(to + ".new", to);
}

TEST(ZygoteTest, ADriverRebuiltAtTheSamePathRunsItsNewCode) {
  std::string dir = std::filesystem::temp_directory_path() /
                    ("orrery_zygote_test_" + orrery::UniqueId::Random().Hex().substr(0, 8));
  std::filesystem::create_directories(dir);
  std::string driver = dir + "/driver";
  std::string head = orrery::internal::HeadAddressForTest();
  Replace(ORRERY_VERSION_DRIVER_1, driver);
  EXPECT_THAT(RunDriver(driver, head), HasSubstr("VERSION 1"));
  Replace(ORRERY_VERSION_DRIVER_2, driver);
  EXPECT_THAT(RunDriver(driver, head), HasSubstr("VERSION 2"))
      << "the old build's zygote ran the new driver's actor";
  std::filesystem::remove_all(dir);
}

// A zygote runs the driver's main() up to Init(): what that part prints goes to the zygote's
// file in the node's log folder, not a second time to the driver's output (a pipe here, so
// the line sat in stdio's buffer when the zygote forked). Before, it came out twice.
TEST(ZygoteTest, WhatADriverPrintsBeforeInitComesOutOnce) {
  std::string out = RunDriver(ORRERY_VERSION_DRIVER_1, "embedded");
  EXPECT_THAT(out, HasSubstr("VERSION 1"));
  size_t count = 0;
  for (size_t at = out.find("BEFORE INIT"); at != std::string::npos;
       at = out.find("BEFORE INIT", at + 1))
    ++count;
  EXPECT_EQ(count, 1u) << out;
}

}  // namespace
