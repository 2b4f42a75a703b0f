// Init, IsInitialized and Shutdown themselves (this binary has no shared cluster
// environment), and the death of a driver: its workers must not outlive it.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "remote_functions.h"
#include "test_support.h"

extern char** environ;

namespace {

using orrery_test::kGetTimeoutMs;
using orrery_test::ProcessGone;
using orrery_test::WaitFor;
using ::testing::HasSubstr;

TEST(LifecycleTest, NothingRunsBeforeInit) {
  EXPECT_FALSE(orrery::IsInitialized());
  EXPECT_THROW(orrery::Task(Add).Remote(1, 2), orrery::Error);
  EXPECT_THROW(orrery::Put(1), orrery::Error);
  EXPECT_THROW(orrery::Actor(Counter::Create).Remote(0), orrery::Error);
}

TEST(LifecycleTest, InitRejectsBadConfiguration) {
  orrery::Config bad_resources = orrery_test::TestClusterConfig();
  bad_resources.resources = {{"Custom", 1.5}};
  EXPECT_THROW(orrery::Init(bad_resources), orrery::ConfigError);
  EXPECT_FALSE(orrery::IsInitialized());

  std::string prog = "lifecycle_test", flag = "--orrery-no-such-flag=1";
  char* argv[] = {prog.data(), flag.data(), nullptr};
  try {
    orrery::Init(orrery_test::TestClusterConfig(), 2, argv);
    ADD_FAILURE() << "expected ConfigError";
  } catch (const orrery::ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--orrery-no-such-flag"));
  }
  EXPECT_FALSE(orrery::IsInitialized());
}

TEST(LifecycleTest, InitStartsWorkersAndShutdownStopsThem) {
  orrery::Init(orrery_test::TestClusterConfig());
  ASSERT_TRUE(orrery::IsInitialized());

  auto c = orrery::Actor(Counter::Create).Remote(1);
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 2);
  int actor_pid = *orrery::Get(c.Task(&Counter::Pid).Remote(), kGetTimeoutMs);
  int task_pid = *orrery::Get(orrery::Task(WorkerPid).Remote(), kGetTimeoutMs);
  EXPECT_NE(actor_pid, int(getpid()));
  EXPECT_NE(task_pid, int(getpid()));

  orrery::Shutdown();
  EXPECT_FALSE(orrery::IsInitialized());
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(actor_pid); }))
      << "actor worker " << actor_pid << " outlived Shutdown";
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(task_pid); }))
      << "task worker " << task_pid << " outlived Shutdown";
  EXPECT_THROW(orrery::Task(Add).Remote(1, 2), orrery::Error);
  EXPECT_NO_THROW(orrery::Shutdown()) << "a second Shutdown is a no-op";
}

// Reads one line from `fd` before `deadline`; empty on timeout or EOF.
std::string ReadLine(int fd, std::chrono::steady_clock::time_point deadline) {
  std::string line;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char ch;
    ssize_t n = read(fd, &ch, 1);
    if (n <= 0) return std::string();
    if (ch == '\n') return line;
    line.push_back(ch);
  }
  return std::string();
}

TEST(DriverKilledTest, WorkersExitWhenTheDriverIsKilled) {
  // Orphaned workers are re-parented to this process, so they can be reaped here and
  // kill(pid, 0) reports ESRCH once they have exited.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);

  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  std::string path = ORRERY_DRIVER_DEATH_HELPER;
  char* argv[] = {path.data(), nullptr};
  pid_t driver = -1;
  int rc = posix_spawn(&driver, path.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  ASSERT_EQ(rc, 0) << "cannot start " << path;

  std::string line = ReadLine(fds[0], std::chrono::steady_clock::now() + std::chrono::seconds(120));
  close(fds[0]);
  std::vector<pid_t> workers;
  std::istringstream in(line);
  std::string tag;
  in >> tag;
  for (int pid; in >> pid;) workers.push_back(pid_t(pid));

  kill(driver, SIGKILL);
  int status = 0;
  waitpid(driver, &status, 0);

  ASSERT_EQ(tag, "PIDS") << "the helper driver printed '" << line << "'";
  ASSERT_EQ(workers.size(), 3u) << line;
  for (pid_t w : workers) EXPECT_NE(w, driver);

  bool all_gone = WaitFor([&] {
    for (pid_t w : workers) {
      waitpid(w, nullptr, WNOHANG);  // reap it if it was re-parented to us
      if (!(kill(w, 0) == -1 && errno == ESRCH)) return false;
    }
    return true;
  });
  if (!all_gone) {
    std::string alive;
    for (pid_t w : workers) {
      if (!ProcessGone(w)) alive += " " + std::to_string(w);
      kill(w, SIGKILL);  // do not leave them behind
      waitpid(w, nullptr, WNOHANG);
    }
    ADD_FAILURE() << "workers still alive after the driver died:" << alive;
  }
}

}  // namespace
