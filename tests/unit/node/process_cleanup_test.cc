// What a job leaves behind dies with it (docs/architecture.md "Processes a job or worker leaves
// behind"): a driver that starts a process in a new session (setsid), out of its process
// group, sees it killed when the driver exits and when the job is stopped, and the job's
// cgroup is removed; a new node removes the subtree a node that died left behind. Each job
// case runs twice: with cgroups (skipped where cgroup v2 cannot be written, or
// ORRERY_NO_CGROUPS=1) and without, where the node finds the grandchild by the
// ORRERY_SUBMISSION_ID in its environment. Real processes (a shell script as the job's
// driver), so apart from node_unit_test.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/internal/file_hash.h"
#include "node/src/job_runner.h"
#include "node/src/process_cgroup.h"
#include "tests/fakes/recording_outbox.h"

namespace orrery::node {
namespace {

using ::orrery::testing::RecordingOutbox;
using proto::MsgType;

// The driver: starts a grandchild in a new session that writes its pid to $PIDFILE, waits
// for the pid, then exits ($1 = exit) or sleeps until stopped ($1 = sleep).
constexpr const char* kDriver = R"(#!/bin/sh
setsid sh -c 'echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 1000' sh "$PIDFILE" \
  </dev/null >/dev/null 2>&1 &
while [ ! -s "$PIDFILE" ]; do :; done
[ "$1" = exit ] && exit 0
exec sleep 1000
)";

bool WaitFor(const std::function<bool()>& done, double seconds = 30) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
  }
  return true;
}

// Gone, or a zombie nobody reaped yet (it runs nothing).
bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) == -1 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

// The parameter: whether the node uses cgroups.
struct ProcessCleanupTest : ::testing::TestWithParam<bool> {
  void SetUp() override {
    if (GetParam()) {
      tree = CgroupTree::Create();
      if (!tree) GTEST_SKIP() << "cgroup v2 is not writable here (or ORRERY_NO_CGROUPS is set)";
    }
    dir = std::filesystem::temp_directory_path() /
          ("orrery-cleanup-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir / "logs");
    cache = std::make_unique<ExecutableCache>(outbox, "tcp://head", (dir / "cache").string());
    jobs = std::make_unique<JobRunner>(
        JobRunnerOptions{"tcp://head", "node-id", "node1", "s3cret", (dir / "logs").string(), {}},
        outbox, *cache);
    jobs->SetCgroups(tree.get());
  }
  void TearDown() override {
    jobs.reset();
    // A failed test leaves nothing running either.
    if (grandchild > 0 && !ProcessGone(grandchild)) kill(grandchild, SIGKILL);
    std::string path = tree ? tree->path() : "";
    tree.reset();
    if (!path.empty()) {
      EXPECT_FALSE(std::filesystem::exists(path)) << "a stray cgroup: " << path;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  // Starts the driver as job `sid` (its executable fetched from the "head"); the
  // grandchild's pid once it runs.
  pid_t Start(const std::string& sid, const std::string& mode) {
    proto::StartJobMsg m;
    m.submission_id = sid;
    m.argv = {"driver", mode};
    m.binary_hash = HashBytes(kDriver);
    m.env["PIDFILE"] = (dir / (sid + ".pid")).string();
    jobs->OnStart(m, "tcp://node");
    auto ask = outbox.Take<proto::BinaryMsg>(MsgType::kFetchBinary, "tcp://head");
    if (!ask) return -1;
    auto fetched = cache->OnReply(*ask, kDriver);
    if (!fetched.ok() || !fetched.value().error.empty()) return -1;
    jobs->OnExecutable(sid, m.binary_hash, false, "");
    pid_t pid = -1;
    WaitFor([&] {
      jobs->Check();
      std::ifstream in(m.env["PIDFILE"]);
      return bool(in >> pid);
    });
    return pid;
  }
  // Ticks the runner until the job's exit is reported.
  bool Exited(const std::string& sid) {
    return WaitFor([&] {
      jobs->Check();
      while (auto ev = outbox.Take<proto::JobEventMsg>(MsgType::kJobEvent, "tcp://head")) {
        if (ev->submission_id == sid && ev->kind == int(proto::JobEventKind::kExited)) return true;
      }
      return false;
    });
  }
  bool CgroupGone(const std::string& sid) {
    if (!tree) return true;
    return WaitFor([&] {
      tree->Sweep();
      return !std::filesystem::exists(tree->path() + "/job-" + sid);
    });
  }

  std::unique_ptr<CgroupTree> tree;
  pid_t grandchild = -1;
  std::filesystem::path dir;
  RecordingOutbox outbox;
  std::unique_ptr<ExecutableCache> cache;
  std::unique_ptr<JobRunner> jobs;
};

TEST_P(ProcessCleanupTest, AGrandchildInANewSessionDiesWhenTheDriverExits) {
  grandchild = Start("job_exit", "exit");
  ASSERT_GT(grandchild, 0);
  ASSERT_TRUE(Exited("job_exit"));
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(grandchild); }))
      << "the grandchild " << grandchild << " outlived its job";
  EXPECT_TRUE(CgroupGone("job_exit"));
}

TEST_P(ProcessCleanupTest, AGrandchildInANewSessionDiesWhenTheJobIsStopped) {
  grandchild = Start("job_stop", "sleep");
  ASSERT_GT(grandchild, 0);
  if (tree) {
    std::ifstream cgroup("/proc/" + std::to_string(grandchild) + "/cgroup");
    std::string line;
    while (std::getline(cgroup, line) && line.rfind("0::", 0) != 0) {
    }
    EXPECT_NE(line.find("/job-job_stop"), std::string::npos) << line;
  }
  jobs->OnStop(proto::StopJobMsg{.submission_id = "job_stop"});
  ASSERT_TRUE(Exited("job_stop"));
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(grandchild); }))
      << "the grandchild " << grandchild << " outlived its stopped job";
  EXPECT_TRUE(CgroupGone("job_stop"));
}

TEST_P(ProcessCleanupTest, StoppingTheNodeKillsWhatItsJobsStarted) {
  grandchild = Start("job_node", "sleep");
  ASSERT_GT(grandchild, 0);
  jobs->StopAll();
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(grandchild); }));
  EXPECT_TRUE(CgroupGone("job_node"));
}

TEST(CgroupTreeTest, ANewNodeRemovesTheSubtreeOfANodeThatDied) {
  auto tree = CgroupTree::Create();
  if (!tree) GTEST_SKIP() << "cgroup v2 is not writable here (or ORRERY_NO_CGROUPS is set)";
  pid_t dead = fork();  // a pid that no process has once reaped
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  std::string parent = tree->path().substr(0, tree->path().rfind('/'));
  std::string stale = parent + "/orrery-node-" + std::to_string(dead);
  ASSERT_EQ(mkdir(stale.c_str(), 0755), 0) << stale;
  ASSERT_EQ(mkdir((stale + "/job-left").c_str(), 0755), 0);
  tree.reset();  // this node's subtree goes, and a new one is made
  tree = CgroupTree::Create();
  ASSERT_TRUE(tree);
  EXPECT_FALSE(std::filesystem::exists(stale));
  RemoveCgroup(stale);
}

INSTANTIATE_TEST_SUITE_P(CgroupsAndNot, ProcessCleanupTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Cgroups" : "NoCgroups";
                         });

}  // namespace
}  // namespace orrery::node
