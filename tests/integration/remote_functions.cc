#include "remote_functions.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "actors/internal/test_hooks.h"

namespace {
constexpr int kInnerGetTimeoutMs = 60000;
}

int Add(int a, int b) { return a + b; }
std::string Echo(std::string s) { return s; }
std::vector<int> Range(int n) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) out.push_back(i);
  return out;
}
Point Mirror(Point p) { return Point{p.y, p.x}; }
std::map<std::string, std::vector<int>> EchoNested(std::map<std::string, std::vector<int>> m) {
  return m;
}
void Nothing(int) {}
int ThrowInvalidArgument(std::string message) { throw std::invalid_argument(message); }
int ThrowCustom(std::string message) { throw CustomTestError(message); }
int ThrowNonStandard(int code) { throw code; }
int NestedAdd(int a, int b) {
  return *orrery::Get(orrery::Task(Add).Remote(a, b), kInnerGetTimeoutMs);
}
int SumRefs(std::vector<orrery::ObjectRef<int>> refs) {
  int sum = 0;
  for (const auto& r : refs) sum += *orrery::Get(r, kInnerGetTimeoutMs);
  return sum;
}
int WorkerPid() { return int(getpid()); }
int IncViaTask(orrery::ActorHandle<Counter> counter, int by) {
  return *orrery::Get(counter.Task(&Counter::Inc).Remote(by), kInnerGetTimeoutMs);
}
int IncNamed(std::string name, std::string namespace_, int by) {
  auto counter = orrery::GetActor<Counter>(name, namespace_);
  if (!counter) return -1;
  return *orrery::Get(counter->Task(&Counter::Inc).Remote(by), kInnerGetTimeoutMs);
}
namespace {
// True when `marker` already existed; creates it otherwise.
bool MarkOnce(const std::string& marker) {
  if (std::FILE* f = std::fopen(marker.c_str(), "r")) {
    std::fclose(f);
    return true;
  }
  if (std::FILE* f = std::fopen(marker.c_str(), "w")) std::fclose(f);
  return false;
}
}  // namespace

int CrashOnce(std::string marker) {
  if (!MarkOnce(marker)) std::_Exit(4);
  return 7;
}
int NotRegistered(int x) { return x; }

Counter* Counter::Create(int start) { return new Counter(start); }
int Counter::Inc(int by) {
  value_ += by;
  return value_;
}
int Counter::Value() const { return value_; }
int Counter::Pid() { return int(getpid()); }
int Counter::Fail(std::string message) { throw std::runtime_error(message); }
std::string Counter::Address() { return orrery::internal::WorkerAddressForTest(); }
int Counter::Crash() { std::_Exit(3); }
int Counter::CrashOnce(std::string marker) {
  if (!MarkOnce(marker)) std::_Exit(4);
  return value_;
}
int Counter::NotRegisteredMethod() { return 0; }

Gate* Gate::Create() { return new Gate(); }
void Gate::Open() {
  std::lock_guard<std::mutex> lock(mu_);
  open_ = true;
  cv_.notify_all();
}
int Gate::WaitOpen(int value, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return open_; })) {
    throw std::runtime_error("the gate was not opened in time");
  }
  return value;
}

Barrier* Barrier::Create() { return new Barrier(); }
bool Barrier::Arrive(int n, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  ++arrived_;
  cv_.notify_all();
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return arrived_ >= n; });
}

Log* Log::Create() { return new Log(); }
int Log::Append(int x) {
  items_.push_back(x);
  return int(items_.size());
}
std::vector<int> Log::Items() const { return items_; }

Caller* Caller::Create() { return new Caller(); }
int Caller::IncOther(orrery::ActorHandle<Counter> counter, int by) {
  return *orrery::Get(counter.Task(&Counter::Inc).Remote(by), kInnerGetTimeoutMs);
}
int Caller::AddViaTask(int a, int b) {
  return *orrery::Get(orrery::Task(Add).Remote(a, b), kInnerGetTimeoutMs);
}
int Caller::WaitForRef(std::vector<orrery::ObjectRef<int>> refs) {
  return SumRefs(std::move(refs));
}

Faulty* Faulty::Create(std::string message) { throw std::runtime_error(message); }
int Faulty::Ping() { return 1; }

ORRERY_REMOTE(Add, Echo, Range, Mirror, EchoNested, Nothing, ThrowInvalidArgument, ThrowCustom,
              ThrowNonStandard, NestedAdd, SumRefs, WorkerPid, IncViaTask, IncNamed, CrashOnce);
ORRERY_REMOTE(Counter::Create, &Counter::Inc, &Counter::Value, &Counter::Pid, &Counter::Fail,
              &Counter::Address, &Counter::Crash, &Counter::CrashOnce);
ORRERY_REMOTE(Gate::Create, &Gate::Open, &Gate::WaitOpen);
ORRERY_REMOTE(Barrier::Create, &Barrier::Arrive);
ORRERY_REMOTE(Log::Create, &Log::Append, &Log::Items);
ORRERY_REMOTE(Caller::Create, &Caller::IncOther, &Caller::AddViaTask, &Caller::WaitForRef);
ORRERY_REMOTE(Faulty::Create, &Faulty::Ping);
