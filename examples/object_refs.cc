// object_refs: values live in the cluster and are named by ObjectRefs. Put a value, pass
// refs to tasks (they run once their inputs exist), Wait for the first results, Get them.
//
//   ./object_refs
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "example_main.h"
#include "orrery/orrery.h"

std::vector<int> MakeRange(int n) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), 1);
  return v;
}

long long Sum(std::vector<int> values) {
  return std::accumulate(values.begin(), values.end(), 0LL);
}

int Scale(int x, int factor) { return x * factor; }

// Refs can travel inside values too: the receiver fetches each one from its owner.
int SumAll(std::vector<orrery::ObjectRef<int>> refs) {
  int total = 0;
  for (const auto& r : refs) total += *orrery::Get(r);
  return total;
}

ORRERY_REMOTE(MakeRange, Sum, Scale, SumAll);

namespace {

using orrery_examples::Check;

bool Run() {
  bool ok = true;

  std::printf("Put and Get:\n");
  orrery::ObjectRef<std::string> greeting = orrery::Put(std::string("hello, cluster"));
  ok &= Check(*orrery::Get(greeting) == "hello, cluster", "Put a string, Get it back");

  std::printf("refs as arguments:\n");
  // MakeRange's result goes straight into Sum: the driver never holds the vector.
  orrery::ObjectRef<std::vector<int>> range = orrery::Task(MakeRange).Remote(100);
  orrery::ObjectRef<long long> total = orrery::Task(Sum).Remote(range);
  ok &= Check(*orrery::Get(total) == 5050,
              "Sum(MakeRange(100)) = " + std::to_string(*orrery::Get(total)));
  orrery::ObjectRef<int> factor = orrery::Put(3);
  ok &= Check(*orrery::Get(orrery::Task(Scale).Remote(14, factor)) == 42, "Scale(14, Put(3)) = 42");

  std::printf("Wait:\n");
  std::vector<orrery::ObjectRef<int>> refs;
  for (int i = 1; i <= 8; ++i) refs.push_back(orrery::Task(Scale).Remote(i, 10));
  orrery::WaitResult<int> first = orrery::Wait(refs, 3, /*timeout_ms=*/30000);
  ok &= Check(first.ready.size() == 3, "Wait(refs, 3) returned " +
                                           std::to_string(first.ready.size()) + " ready, " +
                                           std::to_string(first.unready.size()) + " not yet");
  orrery::WaitResult<int> all = orrery::Wait(refs, int(refs.size()), 30000);
  ok &= Check(all.unready.empty(), "then all 8 are ready");

  std::printf("Get many, refs inside values:\n");
  int sum = 0;
  for (const auto& v : orrery::Get(refs)) sum += *v;
  ok &= Check(sum == 360, "sum of 8 results = " + std::to_string(sum));
  ok &=
      Check(*orrery::Get(orrery::Task(SumAll).Remote(refs)) == 360, "SumAll(vector of refs) = 360");

  std::printf("Get with a timeout:\n");
  ok &= Check(*orrery::Get(refs[0], /*timeout_ms=*/10000) == 10, "Get(ref, 10000) = 10");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  orrery::Init(argc, argv);
  return orrery_examples::RunThenShutdown("object_refs", Run);
}
