#include "metrics.h"

#include <dirent.h>
#include <orrery/orrery.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace orrery::bench {

// What Ray's benchmarks call and return: small_value() -> b"ok".
std::string SmallValue() { return "ok"; }

int64_t One() { return 1; }

// This process's threads and resident bytes (/proc/self/status).
std::map<std::string, double> ThreadsAndRss() {
  std::map<std::string, double> out;
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    double v = 0;
    if (key == "Threads:" && in >> v) out["actor_threads"] = v;
    if (key == "VmRSS:" && in >> v) out["actor_rss_bytes"] = v * 1024;
    std::getline(in, key);
  }
  return out;
}

class BenchActor {
 public:
  static BenchActor* Create() { return new BenchActor(); }
  std::string SmallValue() { return "ok"; }
  int Pid() { return int(getpid()); }
  // As Ray's async actor's small_value: a coroutine that returns at once.
  Async<std::string> SmallValueAsync() { co_return "ok"; }
  // Fans out n tasks and gathers their results on the actor's one call thread; notes its
  // threads and resident memory while they are in flight.
  Async<int64_t> FanOut(int n) {
    std::vector<ObjectRef<int64_t>> refs;
    refs.reserve(n);
    for (int i = 0; i < n; ++i) refs.push_back(Task(One).Remote());
    in_flight_ = ThreadsAndRss();
    int64_t sum = 0;
    for (const auto& v : co_await refs) sum += *v;
    co_return sum;
  }
  std::map<std::string, double> InFlight() { return in_flight_; }

 private:
  std::map<std::string, double> in_flight_;
};

}  // namespace orrery::bench

ORRERY_REMOTE(orrery::bench::SmallValue, orrery::bench::One, orrery::bench::BenchActor::Create,
              &orrery::bench::BenchActor::Pid, &orrery::bench::BenchActor::SmallValue,
              &orrery::bench::BenchActor::SmallValueAsync, &orrery::bench::BenchActor::FanOut,
              &orrery::bench::BenchActor::InFlight);

namespace orrery::bench {
namespace {

ActorHandle<BenchActor> NewActor(int max_concurrency = 1) {
  return Actor(BenchActor::Create)
      .SetResources({{kActorResource, 1}})
      .SetMaxConcurrency(max_concurrency)
      .Remote();
}

void Expect(const std::shared_ptr<std::string>& v) {
  if (!v || *v != "ok")
    throw std::runtime_error("unexpected result: " + (v ? *v : std::string("null")));
}

template <typename T>
void GetAll(const std::vector<ObjectRef<T>>& refs, int timeout_ms) {
  for (const auto& r : refs) Expect(Get(r, timeout_ms));
}

// ray.get(a.small_value.remote())
Rate ActorCallsSync(const MetricOptions& o) {
  auto a = NewActor();
  Rate r = TimeIt([&] { Expect(Get(a.Task(&BenchActor::SmallValue).Remote(), o.timeout_ms)); }, 1,
                  o.timing);
  a.Kill();
  return r;
}

// ray.get([a.small_value.remote() for _ in range(1000)])
Rate ActorCallsBatch(const MetricOptions& o, int max_concurrency) {
  auto a = NewActor(max_concurrency);
  auto step = [&] {
    std::vector<ObjectRef<std::string>> refs;
    refs.reserve(o.batch);
    for (int i = 0; i < o.batch; ++i) refs.push_back(a.Task(&BenchActor::SmallValue).Remote());
    GetAll(refs, o.timeout_ms);
  };
  Rate r = TimeIt(step, o.batch, o.timing);
  a.Kill();
  return r;
}

Rate ActorCallsAsync(const MetricOptions& o) { return ActorCallsBatch(o, 1); }

// An async actor (its method a coroutine; default max_concurrency, 1,000 in flight):
// ray.get([a.small_value.remote() for _ in range(1000)]) on Ray's async actor.
Rate AsyncActorCallsAsync(const MetricOptions& o) {
  auto a = Actor(BenchActor::Create).SetResources({{kActorResource, 1}}).Remote();
  auto step = [&] {
    std::vector<ObjectRef<std::string>> refs;
    refs.reserve(o.batch);
    for (int i = 0; i < o.batch; ++i) refs.push_back(a.Task(&BenchActor::SmallValueAsync).Remote());
    GetAll(refs, o.timeout_ms);
  };
  Rate r = TimeIt(step, o.batch, o.timing);
  a.Kill();
  return r;
}

// One async actor fans out kFanOutTasks tasks and gathers them: tasks per second, and the
// actor's threads and resident memory while they are all in flight.
Rate AsyncActorFanOut(const MetricOptions& o) {
  auto a = Actor(BenchActor::Create).SetResources({{kActorResource, 1}}).Remote();
  auto step = [&] {
    if (*Get(a.Task(&BenchActor::FanOut).Remote(kFanOutTasks), o.timeout_ms) != kFanOutTasks)
      throw std::runtime_error("the fan-out lost results");
  };
  Rate r = TimeIt(step, kFanOutTasks, o.timing);
  r.extra = *Get(a.Task(&BenchActor::InFlight).Remote(), o.timeout_ms);
  a.Kill();
  return r;
}
Rate ActorCallsConcurrent(const MetricOptions& o) { return ActorCallsBatch(o, o.concurrency); }

// ray.get(small_value.remote())
Rate TasksSync(const MetricOptions& o) {
  return TimeIt([&] { Expect(Get(Task(SmallValue).Remote(), o.timeout_ms)); }, 1, o.timing);
}

// ray.get([small_value.remote() for _ in range(1000)])
Rate TasksAsync(const MetricOptions& o) {
  auto step = [&] {
    std::vector<ObjectRef<std::string>> refs;
    refs.reserve(o.batch);
    for (int i = 0; i < o.batch; ++i) refs.push_back(Task(SmallValue).Remote());
    GetAll(refs, o.timeout_ms);
  };
  return TimeIt(step, o.batch, o.timing);
}

// ray.put(0)
Rate PutCalls(const MetricOptions& o) {
  return TimeIt([] { (void)Put(0); }, 1, o.timing);
}

// value = ray.put(0); ray.get(value)
Rate GetCalls(const MetricOptions& o) {
  ObjectRef<int> value = Put(0);
  return TimeIt(
      [&] {
        if (*Get(value, o.timeout_ms) != 0) throw std::runtime_error("Get(Put(0)) != 0");
      },
      1, o.timing);
}

// Create N actors (one worker process each), call a method on each and wait for every
// reply, then kill them. Counts actors per second, from the first creation request to the
// last reply.
Rate ActorCreation(const MetricOptions& o) {
  auto step = [&] {
    std::vector<ActorHandle<BenchActor>> actors;
    actors.reserve(o.actors);
    for (int i = 0; i < o.actors; ++i) actors.push_back(NewActor());
    std::vector<ObjectRef<std::string>> refs;
    refs.reserve(o.actors);
    for (auto& a : actors) refs.push_back(a.Task(&BenchActor::SmallValue).Remote());
    GetAll(refs, o.timeout_ms);
    for (auto& a : actors) a.Kill();
  };
  return TimeIt(step, o.actors, o.timing);
}

// The state letter and parent of process `pid` (/proc/<pid>/stat); false when it is gone.
bool ReadProcStat(int pid, char* state, int* ppid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  size_t paren = line.rfind(')');
  return paren != std::string::npos &&
         std::sscanf(line.c_str() + paren + 1, " %c %d", state, ppid) == 2;
}

// Worker processes below this one (the embedded node's zygote forks them) that have started
// their call inbox: a thread named orrery-calls.
int StartedWorkerProcesses() {
  std::map<int, int> parent;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      int pid = std::atoi(e->d_name);
      char state = 0;
      int ppid = 0;
      if (pid > 0 && ReadProcStat(pid, &state, &ppid) && state != 'Z') parent[pid] = ppid;
    }
    closedir(d);
  }
  int self = int(getpid()), n = 0;
  for (const auto& [pid, ppid] : parent) {
    int up = ppid;
    for (int depth = 0; depth < 8 && up > 1 && up != self; ++depth)
      up = parent.count(up) ? parent[up] : 0;
    if (up != self) continue;
    std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
    DIR* tasks = opendir(task_dir.c_str());
    if (!tasks) continue;
    while (dirent* t = readdir(tasks)) {
      std::ifstream comm(task_dir + "/" + t->d_name + "/comm");
      std::string name;
      if (std::getline(comm, name) && name == "orrery-calls") {
        ++n;
        break;
      }
    }
    closedir(tasks);
  }
  return n;
}

// Whether `pid` is gone (reaped, or a zombie).
bool ProcessGone(int pid) {
  char state = 0;
  int ppid = 0;
  return !ReadProcStat(pid, &state, &ppid) || state == 'Z';
}

// Creates `n` actors at once, calls each once and waits for every reply, then kills them:
// actors per second from the first creation to the last reply.
double CreateCallKill(int n, int64_t timeout_ms, std::vector<int>* pids = nullptr) {
  auto start = std::chrono::steady_clock::now();
  std::vector<ActorHandle<BenchActor>> actors;
  actors.reserve(n);
  for (int i = 0; i < n; ++i) actors.push_back(NewActor());
  std::vector<ObjectRef<std::string>> refs;
  refs.reserve(n);
  for (auto& a : actors) refs.push_back(a.Task(&BenchActor::SmallValue).Remote());
  GetAll(refs, timeout_ms);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (pids) {  // untimed: which processes the actors ran in
    std::vector<ObjectRef<int>> asked;
    for (auto& a : actors) asked.push_back(a.Task(&BenchActor::Pid).Remote());
    for (const auto& pid : Get(asked, int(timeout_ms))) pids->push_back(*pid);
  }
  for (auto& a : actors) a.Kill();
  return n / s;
}

// A burst of kBurstActors actors served by prestarted workers: before each burst (untimed)
// waits until the node has replaced the previous burst's workers with as many started
// spares; then creates the actors, calls each once and waits
// for every reply. Actors per second of the burst, from the first creation to the last reply.
Rate ActorCreationBurst(const MetricOptions& o) {
  using Clock = std::chrono::steady_clock;
  auto spares_within = [&](double seconds) {
    auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    // Idle task workers of earlier metrics count too: a burst may then find fewer spares
    // than it counted and fork the rest, which only lowers its rate.
    while (StartedWorkerProcesses() < kBurstActors) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  };
  auto wait_for_spares = [&] {
    if (!spares_within(60))
      throw std::runtime_error("the node did not prestart " + std::to_string(kBurstActors) +
                               " workers within 60 s (Config::prestarted_workers)");
  };
  auto burst = [&] { return CreateCallKill(kBurstActors, o.timeout_ms); };
  // The first bursts are forked and tell the node how many spares to keep: as many as were
  // asked for within a second, which a slow first burst may not reach.
  for (int i = 0; i < 4; ++i) {
    burst();
    if (spares_within(10)) break;
  }
  // The next burst waits (untimed) until this one's workers have all ended, so that it does
  // not share the cores with their exits.
  auto timed_burst = [&] {
    wait_for_spares();
    std::vector<int> pids;
    double rate = CreateCallKill(kBurstActors, o.timeout_ms, &pids);
    auto deadline = Clock::now() + std::chrono::seconds(60);
    for (int pid : pids) {
      while (!ProcessGone(pid)) {
        if (Clock::now() > deadline)
          throw std::runtime_error("the killed actors' workers were not gone within 60 s");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    return rate;
  };
  timed_burst();  // warm-up
  std::vector<double> rates;
  const int bursts = std::max(3, o.timing.rounds * 2);
  for (int i = 0; i < bursts; ++i) rates.push_back(timed_burst());
  return RateOf(rates, bursts);
}

// kManyActors actors created at once (far more than the prestarted workers: most are
// forked), each called once, then killed. Actors per second from the first creation to the
// last reply; before each round (untimed) the previous round's workers must be gone.
Rate ActorCreationMany(const MetricOptions& o) {
  using Clock = std::chrono::steady_clock;
  auto wait_for_teardown = [&] {
    auto deadline = Clock::now() + std::chrono::seconds(120);
    while (StartedWorkerProcesses() > 2 * kBurstActors) {
      if (Clock::now() > deadline)
        throw std::runtime_error("the killed actors' workers were not gone within 120 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  };
  std::vector<double> rates;
  const int rounds = std::max(1, o.timing.rounds / 2);
  for (int round = 0; round < rounds; ++round) {
    wait_for_teardown();
    rates.push_back(CreateCallKill(kManyActors, std::max<int64_t>(o.timeout_ms, 600000)));
  }
  return RateOf(rates, rounds);
}

}  // namespace

const std::vector<Metric>& Metrics() {
  static const std::vector<Metric> metrics = {
      {"1_1_actor_calls_sync", "one actor; call a method and wait for its reply, one at a time",
       ActorCallsSync},
      {"1_1_actor_calls_async", "one actor; submit a batch of calls, then wait for all replies",
       ActorCallsAsync},
      {"1_1_async_actor_calls_async",
       "one async actor (a coroutine method); submit a batch of calls, then wait for all replies",
       AsyncActorCallsAsync},
      {"async_actor_fanout_10000",
       "one async actor submits 10,000 tasks and co_awaits them all; tasks per second, with the "
       "actor's threads and resident bytes while they are in flight",
       AsyncActorFanOut},
      {"1_1_actor_calls_concurrent",
       "one actor with max concurrency 16; submit a batch of calls, then wait for all replies",
       ActorCallsConcurrent},
      {"single_client_tasks_sync", "submit one task and wait for its result, one at a time",
       TasksSync},
      {"single_client_tasks_async", "submit a batch of tasks, then wait for all results",
       TasksAsync},
      {"single_client_put_calls", "Put(0) into the driver's object store", PutCalls},
      {"single_client_get_calls", "Get() of one ready object put by the driver", GetCalls},
      {"actor_creation",
       "create N actors (a process each), call a method on each, wait for all replies, kill them",
       ActorCreation},
      {"actor_creation_burst_32",
       "create 32 actors at once from the node's prestarted workers, call each, wait for all "
       "replies (the wait for the node to prestart the next 32 is not counted)",
       ActorCreationBurst},
      {"actor_creation_1000",
       "create 1,000 actors at once (most forked: more than the prestarted workers), call each, "
       "wait for all replies, kill them; --rounds / 2 times (the teardown between is not "
       "counted)",
       ActorCreationMany},
  };
  return metrics;
}

}  // namespace orrery::bench
