// 2,000 actors created at once on one node, all answering while a CPU burner keeps every core
// busy: the node queues spawn requests the zygote's socket cannot take yet instead of failing
// them (it failed past ~170), and a slow machine is not taken for a dead one (no node or driver
// declared dead: docs/architecture.md "Failure detection"). Prints what an idle worker costs
// (proportional set size and threads), the figure that decides how many fit a host.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "test_support.h"
#include "tests/fakes/cpu_burner.h"
#include "tests/sanitizers.h"

namespace {

// Sanitizer builds make each process several times heavier: fewer actors there, still
// more than the zygote's socket holds at once (about 170 requests).
constexpr int kActors = orrery_test::kSanitized ? 400 : 2000;

class Tiny {
 public:
  static Tiny* Create(int id) { return new Tiny(id); }
  int Id() { return id_; }
  int Pid() { return int(getpid()); }

 private:
  explicit Tiny(int id) : id_(id) {}
  int id_;
};

ORRERY_REMOTE(Tiny::Create, &Tiny::Id, &Tiny::Pid);

// A line "<key>: <number> ..." of a /proc file, or -1.
long long ProcValue(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, key.size() + 1, key + ":") == 0)
      return std::stoll(line.substr(key.size() + 1));
  }
  return -1;
}

using ::orrery::testing::CpuBurner;

// Shuts the cluster down however the test ends (an assertion returns early).
struct ClusterGuard {
  ~ClusterGuard() {
    if (orrery::IsInitialized()) orrery::Shutdown();
  }
};

TEST(ManyActorsTest, TwoThousandActorsAtOnceOnOneNodeAllAnswer) {
  orrery::Config config = orrery_test::TestClusterConfig();
  config.num_cpus = kActors;  // one CPU per actor, as actors hold by default
  orrery::Init(config);
  ClusterGuard guard;
  CpuBurner burner;
  std::vector<orrery::ActorHandle<Tiny>> actors;
  actors.reserve(kActors);
  for (int i = 0; i < kActors; ++i) actors.push_back(orrery::Actor(Tiny::Create).Remote(i));
  std::vector<orrery::ObjectRef<int>> ids;
  for (auto& a : actors) ids.push_back(a.Task(&Tiny::Id).Remote());
  std::vector<std::shared_ptr<int>> got = orrery::Get(ids, 480000);
  for (int i = 0; i < kActors; ++i) ASSERT_EQ(*got[i], i) << "actor " << i;

  std::vector<orrery::ObjectRef<int>> pid_refs;
  for (int i = 0; i < kActors; i += kActors / 20)
    pid_refs.push_back(actors[i].Task(&Tiny::Pid).Remote());
  std::vector<long long> pss_kb, threads;
  for (auto& p : orrery::Get(pid_refs, orrery_test::kGetTimeoutMs)) {
    std::string proc = "/proc/" + std::to_string(*p);
    pss_kb.push_back(ProcValue(proc + "/smaps_rollup", "Pss"));
    threads.push_back(ProcValue(proc + "/status", "Threads"));
  }
  std::sort(pss_kb.begin(), pss_kb.end());
  std::sort(threads.begin(), threads.end());
  long long median_pss = pss_kb[pss_kb.size() / 2];
  std::printf("idle actor worker: median PSS %lld KiB (max %lld), threads %lld..%lld\n", median_pss,
              pss_kb.back(), threads.front(), threads.back());
  RecordProperty("worker_pss_kib", std::to_string(median_pss));
  RecordProperty("worker_threads", std::to_string(threads.back()));
  // What fits a host: 2,000 workers within a few GiB.
  EXPECT_LT(median_pss, 4096) << "an idle worker costs more than 4 MiB";
  for (auto& a : actors) a.Kill();
}

}  // namespace

namespace {

// What a new user writes: the embedded default (one node of this host's CPUs), 1,000 actors
// at once, one call each. Every actor's worker connects to the driver's inbox at about the
// same moment: the handshakes are admitted at the pace the inbox serves them, and nothing
// queued behind them is dropped.
TEST(ManyActorsTest, AThousandActorsAtOnceOnTheEmbeddedDefaultAllAnswer) {
  constexpr int kCount = kActors / 2;
  orrery::Config config;
  if (std::getenv("ORRERY_LOG_LEVEL") == nullptr) config.log_level = "warn";
  orrery::Init(config);
  ClusterGuard guard;
  std::vector<orrery::ActorHandle<Tiny>> actors;
  actors.reserve(kCount);
  for (int i = 0; i < kCount; ++i) actors.push_back(orrery::Actor(Tiny::Create).Remote(i));
  std::vector<orrery::ObjectRef<int>> ids;
  for (auto& a : actors) ids.push_back(a.Task(&Tiny::Id).Remote());
  std::vector<std::shared_ptr<int>> got = orrery::Get(ids, 480000);
  for (int i = 0; i < kCount; ++i) ASSERT_EQ(*got[i], i) << "actor " << i;
  for (auto& a : actors) a.Kill();
}

}  // namespace
