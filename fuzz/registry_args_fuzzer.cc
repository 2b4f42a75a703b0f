// libFuzzer target: the arguments of a call as a worker receives them (frame 1 of kCall, a
// msgpack array) converted to the parameters of registered functions, factories and actor
// methods (orrery/api/registry.h), the worker's path in actors/src/worker.cc: unpack, then
// the entry's invoke. Wrong shapes and types must become ConvertError (an ArgumentError for
// the caller) and nothing else: no crash, no unbounded allocation.
//
// Input: byte 0 picks the registered entry (kEntryNames); the rest is the msgpack payload.
#include "fuzz/registry_args_fuzzer.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "orrery/orrery.h"

namespace fuzz {

// Wraps around like the two's-complement sum it models (signed overflow would be undefined).
int Add(int a, int b) { return int(unsigned(a) + unsigned(b)); }
uint64_t Widen(int8_t a, uint16_t b, int64_t c, uint64_t d) {
  return uint64_t(a) + b + uint64_t(c) + d;
}
bool Not(bool b) { return !b; }
double Mean(std::vector<double> v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}
std::string Concat(std::string a, const std::vector<std::string>& rest) {
  for (const auto& s : rest) a += s;
  return a;
}
size_t CountNested(std::map<std::string, std::vector<int>> m) {
  size_t n = 0;
  for (const auto& [k, v] : m) n += k.size() + v.size();
  return n;
}
// The sample functions are user code: they must be defined for any argument the fuzzer
// sends, so that only the registry's own bugs are found.
Point Mirror(Point p) {
  int y = std::isfinite(p.y) && std::fabs(p.y) < 1e9 ? int(p.y) : 0;
  return Point{y, double(p.x), p.label};
}
std::pair<int, std::string> Swap(std::tuple<std::string, int> t) {
  return {std::get<1>(t), std::get<0>(t)};
}
std::vector<std::vector<Point>> Grid(std::vector<std::vector<Point>> g) { return g; }
void Sink(std::string, float, std::vector<uint8_t>) {}

class Account {
 public:
  explicit Account(std::string owner, int64_t balance)
      : owner_(std::move(owner)), balance_(balance) {}
  static Account* Create(std::string owner, int64_t balance) {
    return new Account(std::move(owner), balance);
  }
  int64_t Deposit(int64_t amount) {
    if (__builtin_add_overflow(balance_, amount, &balance_)) balance_ = 0;
    return balance_;
  }
  std::string Rename(std::string owner, std::map<std::string, std::string> tags) {
    owner_ = std::move(owner);
    for (const auto& [k, v] : tags) owner_ += k + v;
    return owner_;
  }
  size_t Points(std::vector<Point> ps) { return ps.size(); }

 private:
  std::string owner_;
  int64_t balance_;
};

}  // namespace fuzz

ORRERY_REMOTE(fuzz::Add, fuzz::Widen, fuzz::Not, fuzz::Mean, fuzz::Concat, fuzz::CountNested,
              fuzz::Mirror, fuzz::Swap, fuzz::Grid, fuzz::Sink, fuzz::Account::Create,
              &fuzz::Account::Deposit, &fuzz::Account::Rename, &fuzz::Account::Points);

namespace {

using orrery::internal::FunctionEntry;
using orrery::internal::FunctionKind;

const std::vector<const FunctionEntry*>& Entries() {
  static const std::vector<const FunctionEntry*> entries = [] {
    std::vector<const FunctionEntry*> out;
    for (const char* name : fuzz::kEntryNames) {
      const FunctionEntry* e = orrery::internal::FindByName(name);
      if (e == nullptr) {
        std::fprintf(stderr, "registry_args fuzzer: %s is not registered\n", name);
        std::abort();  // kEntryNames and ORRERY_REMOTE below disagree
      }
      out.push_back(e);
    }
    return out;
  }();
  return entries;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& entries = Entries();
  if (size < 1 || entries.empty()) return 0;
  const FunctionEntry* e = entries[data[0] % entries.size()];
  fuzz::Account account("fuzz", 0);
  void* self = e->kind == FunctionKind::kMethod ? &account : nullptr;
  void* instance = nullptr;
  try {
    // As the worker does (actors/src/worker.cc Execute): unpack within the value limits.
    msgpack::object_handle oh = orrery::internal::UnpackUntrusted(
        reinterpret_cast<const char*>(data + 1), size - 1, orrery::internal::kValueUnpackLimits);
    std::string result =
        e->invoke(self, oh.get(), e->kind == FunctionKind::kFactory ? &instance : nullptr);
    (void)result;
  } catch (const std::exception&) {
    // ConvertError, or msgpack's own errors from unpack: the worker answers both with an
    // error reply.
  }
  if (instance != nullptr && e->deleter != nullptr) e->deleter(instance);
  return 0;
}
