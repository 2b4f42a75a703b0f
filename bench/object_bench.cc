// orrery_object_bench: the object plane's benchmarks (docs/objects.md), with Ray's metric
// names where they exist, each compared with a limit measured in the same run:
//
//   memcpy_limit                      memcpy of the same buffer into a pre-touched one
//   alloc_copy_limit                  a copy into a new std::vector (fresh pages, the C
//                                     library's default: small pages where THP is "madvise";
//                                     measured with the process's kept memory off)
//   fresh_copy_limit                  a copy into new memory advised to use huge pages: the
//                                     fastest a value lands in fresh memory here
//   two_copy_limit                    a memcpy, then a fresh copy: the floor of a value that
//                                     goes through a store into new memory by copies
//   three_copy_limit                  a fresh copy, a memcpy, a fresh copy: the same floor for
//                                     a result that user code first copies into new memory
//   single_client_put_gigabytes       Put of a std::vector<uint8_t>            / memcpy
//   single_client_get_gigabytes       Get of it as std::vector<uint8_t>        / memcpy
//                                                                    (and / fresh_copy_limit)
//   single_client_get_buffer_gigabytes  Get of a stored orrery::Buffer (zero copy)
//   1_1_large_arg_128MB               a task's vector argument (driver -> task) / memcpy
//                                                                    (and / two_copy_limit)
//   1_1_large_arg_128MB_buffer        the same, the task taking an orrery::Buffer
//   1_1_large_result_128MB            an actor's vector result (actor -> driver): a getter
//                                     returning the vector it holds as a const reference,
//                                     packed from it                  / memcpy
//                                                                    (and / two_copy_limit)
//   1_1_large_result_128MB_by_value   the same getter returning a copy (user code's copy
//                                     into new memory first)         / memcpy
//                                                                    (and / three_copy_limit)
//   1_1_large_result_128MB_buffer     the same as an orrery::Buffer (shared, no copy out)
//   raw_tcp_limit                     a TCP stream of the same bytes over loopback
//   cross_node_transfer_gigabytes     a task on a second node reading a value put on the
//                                     first (pulled over the data channel)   / raw TCP
//   unpack_10k_refs_limit             unpacking the same 10,000 refs' bytes with msgpack
//   single_client_get_object_containing_10k_refs   Get of a value holding 10,000 refs
//   spill_through_store               --spill-gb of values through a --spill-store-gb store
//                                     (spilling); checks usage returns to zero
//
//   orrery_object_bench [--mb 128] [--iterations 6] [--only NAME,...] [--spill-gb 4]
//                       [--spill-store-gb 1] [--json]
//
// Rates are medians over the iterations. Exits 1 when a metric failed.
#include <orrery/orrery.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "actors/internal/runtime.h"
#include "actors/internal/test_hooks.h"
#include "bench/object_bench_limits.h"
#include "core/internal/kept_memory.h"
#include "core/internal/security.h"
#include "node/internal/node_service.h"

namespace {

using Bytes = std::vector<uint8_t>;
using Clock = std::chrono::steady_clock;

uint64_t SizeOf(Bytes b) { return b.size(); }
uint64_t SizeOfBuffer(orrery::Buffer b) { return b.size() + b.data()[b.size() / 2] * 0; }
std::string NodeOfBuffer(orrery::Buffer b) {
  return b.size() == 0 ? "" : orrery::GetRuntimeContext().node_id;
}

class Holder {
 public:
  static Holder* Create(uint64_t size) { return new Holder(size); }
  const Bytes& Give() const { return bytes_; }
  Bytes GiveCopy() const { return bytes_; }
  orrery::Buffer GiveBuffer() { return buffer_; }
  uint64_t Touch() { return bytes_.size(); }

 private:
  explicit Holder(uint64_t size) : bytes_(size, 7), buffer_(bytes_) {}
  Bytes bytes_;
  orrery::Buffer buffer_;
};

ORRERY_REMOTE(SizeOf, SizeOfBuffer, NodeOfBuffer, Holder::Create, &Holder::Give, &Holder::GiveCopy,
              &Holder::GiveBuffer, &Holder::Touch);

struct Flags {
  size_t mb = 128;
  int iterations = 6;
  std::vector<std::string> only;
  double spill_gb = 4;
  double spill_store_gb = 1;
  bool json = false;
  std::string token_file;  // the embedded cluster's, so the second node's workers join it
};

struct Outcome {
  std::string name;
  double value = 0;   // GB/s, or ops/s
  std::string unit;   // "GB/s" or "ops/s"
  std::string limit;  // the metric it is compared with
  std::string error;
  std::string floor;  // a second limit: the copies the path cannot avoid, where it has some
};

// The median of `iterations` timings of `op` (seconds), after one warm-up run.
double MedianSeconds(int iterations, const std::function<void()>& op) {
  op();
  std::vector<double> s;
  for (int i = 0; i < iterations; ++i) {
    auto t = Clock::now();
    op();
    s.push_back(std::chrono::duration<double>(Clock::now() - t).count());
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

double Gbps(size_t bytes, double seconds) { return double(bytes) / seconds / 1e9; }

}  // namespace

namespace orrery::bench {

std::vector<Outcome> RunSameNode(const Flags& f) {
  const size_t n = f.mb << 20;
  Bytes value(n, 1);
  std::vector<Outcome> out;
  Bytes dst(n, 0);
  out.push_back(
      {"memcpy_limit",
       Gbps(n, MedianSeconds(f.iterations, [&] { std::memcpy(dst.data(), value.data(), n); })),
       "GB/s", "", ""});
  out.push_back({"fresh_copy_limit",
                 Gbps(n, MedianSeconds(f.iterations, [&] { FreshCopy(value.data(), n); })), "GB/s",
                 "", ""});
  out.push_back({"two_copy_limit",
                 Gbps(n, MedianSeconds(f.iterations,
                                       [&] {
                                         std::memcpy(dst.data(), value.data(), n);
                                         FreshCopy(dst.data(), n);
                                       })),
                 "GB/s", "", ""});
  out.push_back({"three_copy_limit",
                 Gbps(n, MedianSeconds(f.iterations,
                                       [&] {
                                         FreshCopy(value.data(), n);
                                         std::memcpy(dst.data(), value.data(), n);
                                         FreshCopy(dst.data(), n);
                                       })),
                 "GB/s", "", ""});
  dst = Bytes();
  // What a new vector costs with the C library's defaults: the runtime's kept memory off.
  internal::StopKeepingFreedMemory();
  out.push_back({"alloc_copy_limit",
                 Gbps(n, MedianSeconds(f.iterations,
                                       [&] {
                                         Bytes fresh(value.begin(), value.end());
                                         if (fresh[n / 2] != 1) std::abort();
                                       })),
                 "GB/s", "", ""});
  internal::KeepFreedMemory();
  {
    ObjectRef<Bytes> keep;
    out.push_back({"single_client_put_gigabytes",
                   Gbps(n, MedianSeconds(f.iterations, [&] { keep = Put(value); })), "GB/s",
                   "memcpy_limit", ""});
  }
  auto ref = Put(value);
  out.push_back({"single_client_get_gigabytes",
                 Gbps(n, MedianSeconds(f.iterations, [&] { Get(ref); })), "GB/s", "memcpy_limit",
                 "", "fresh_copy_limit"});
  auto bref = Put(Buffer(value));
  out.push_back({"single_client_get_buffer_gigabytes",
                 Gbps(n, MedianSeconds(f.iterations, [&] { Get(bref); })), "GB/s", "memcpy_limit",
                 ""});
  out.push_back({"1_1_large_arg_128MB",
                 Gbps(n, MedianSeconds(f.iterations, [&] { Get(Task(SizeOf).Remote(value)); })),
                 "GB/s", "memcpy_limit", "", "two_copy_limit"});
  Buffer view(value);
  out.push_back(
      {"1_1_large_arg_128MB_buffer",
       Gbps(n, MedianSeconds(f.iterations, [&] { Get(Task(SizeOfBuffer).Remote(view)); })), "GB/s",
       "memcpy_limit", ""});
  auto holder = Actor(Holder::Create).Remote(uint64_t(n));
  Get(holder.Task(&Holder::Touch).Remote());
  out.push_back(
      {"1_1_large_result_128MB",
       Gbps(n, MedianSeconds(f.iterations, [&] { Get(holder.Task(&Holder::Give).Remote()); })),
       "GB/s", "memcpy_limit", "", "two_copy_limit"});
  out.push_back(
      {"1_1_large_result_128MB_by_value",
       Gbps(n, MedianSeconds(f.iterations, [&] { Get(holder.Task(&Holder::GiveCopy).Remote()); })),
       "GB/s", "memcpy_limit", "", "three_copy_limit"});
  out.push_back({"1_1_large_result_128MB_buffer",
                 Gbps(n, MedianSeconds(f.iterations,
                                       [&] { Get(holder.Task(&Holder::GiveBuffer).Remote()); })),
                 "GB/s", "memcpy_limit", ""});
  holder.Kill();
  return out;
}

// A second node in this process (its own inbox, arena and data server) joined to the
// embedded head: a task pinned to it reads a value put on the first.
std::vector<Outcome> RunCrossNode(const Flags& f) {
  const size_t n = f.mb << 20;
  std::vector<Outcome> out;
  out.push_back({"raw_tcp_limit", RawTcpGbps(n, f.iterations), "GB/s", "", ""});
  node::NodeOptions no;
  no.head_address = internal::HeadAddressForTest();
  no.resources = {{"CPU", 2}, {"second_node", 1}};
  no.worker_argv = runtime::SelfCommandLine();
  no.worker_env["ORRERY_TOKEN_FILE"] = f.token_file;
  no.object_store_memory = 4 * n + (64 << 20);
  node::NodeService second(no);
  if (Status s = second.Start(); !s.ok()) {
    out.push_back({"cross_node_transfer_gigabytes", 0, "GB/s", "raw_tcp_limit", s.message()});
    return out;
  }
  Buffer value(Bytes(n, 3));
  NodeAffinitySchedulingStrategy there{second.id(), false};
  std::vector<double> s;
  for (int i = 0; i <= f.iterations; ++i) {
    auto ref = Put(value);  // a new object each time: the second node has no copy yet
    auto t = Clock::now();
    auto node = Get(Task(NodeOfBuffer).SetSchedulingStrategy(there).Remote(ref));
    if (i > 0) s.push_back(std::chrono::duration<double>(Clock::now() - t).count());
    if (*node != second.id().Hex()) {
      out.push_back({"cross_node_transfer_gigabytes", 0, "GB/s", "raw_tcp_limit",
                     "the task ran on node " + *node + ", not the second node"});
      return out;
    }
  }
  std::sort(s.begin(), s.end());
  out.push_back(
      {"cross_node_transfer_gigabytes", Gbps(n, s[s.size() / 2]), "GB/s", "raw_tcp_limit", ""});
  second.Stop();
  return out;
}

std::vector<Outcome> RunRefs(const Flags& f) {
  std::vector<ObjectRef<int>> refs;
  for (int i = 0; i < 10000; ++i) refs.push_back(Put(i));
  auto outer = Put(refs);
  std::vector<Outcome> out;
  out.push_back({"unpack_10k_refs_limit",
                 1.0 / MedianSeconds(f.iterations * 5, [&] { UnpackRefsLimit(refs); }), "ops/s", "",
                 ""});
  out.push_back({"single_client_get_object_containing_10k_refs",
                 1.0 / MedianSeconds(f.iterations * 5, [&] { Get(outer); }), "ops/s",
                 "unpack_10k_refs_limit", ""});
  return out;
}

}  // namespace orrery::bench

namespace {

// --spill-gb of 128 MiB values (smaller in a small store) through a --spill-store-gb store: all
// alive at once (most of them spilled), then each read back and checked, then dropped; usage must
// return to zero.
Outcome RunSpill(const Flags& f) {
  const size_t store = size_t(f.spill_store_gb * double(1ull << 30));
  const size_t n = std::min<size_t>(128 << 20, store / 4);
  const int count = std::max(1, int(f.spill_gb * double(1ull << 30) / double(n)));
  std::string dir = "/tmp/orrery-object-bench-spill-" + std::to_string(getpid());
  orrery::Config c;
  c.log_level = "warn";
  c.object_store_memory = (long long)store;
  c.object_spill_dir = dir;
  orrery::Init(c);
  Outcome r{"spill_through_store", 0, "GB/s", "", ""};
  auto t = Clock::now();
  {
    std::vector<orrery::ObjectRef<Bytes>> refs;
    for (int i = 0; i < count; ++i) refs.push_back(orrery::Put(Bytes(n, uint8_t(i))));
    for (int i = 0; i < count; ++i) {
      auto v = orrery::Get(refs[size_t(i)]);
      if (v->size() != n || (*v)[n / 2] != uint8_t(i))
        r.error = "object " + std::to_string(i) + " came back wrong";
    }
  }
  r.value = Gbps(size_t(count) * n * 2, std::chrono::duration<double>(Clock::now() - t).count());
  auto deadline = Clock::now() + std::chrono::seconds(30);
  uint64_t used = 1;
  while (used != 0 && Clock::now() < deadline) {
    used = 0;
    for (const auto& node : orrery::Nodes()) used += node.object_store_used_bytes;
    if (used) usleep(50000);
  }
  if (used != 0 && r.error.empty()) r.error = "store usage stayed at " + std::to_string(used);
  orrery::Shutdown();
  std::string rm = "rm -rf '" + dir + "'";
  (void)std::system(rm.c_str());
  return r;
}

bool Selected(const Flags& f, const std::string& group) {
  if (f.only.empty()) return true;
  for (const auto& o : f.only)
    if (group.rfind(o, 0) == 0 || o.rfind(group, 0) == 0) return true;
  return false;
}

void Print(std::ostream& os, const std::vector<Outcome>& results) {
  std::map<std::string, double> by_name;
  for (const auto& r : results) by_name[r.name] = r.value;
  for (const auto& r : results) {
    char line[256];
    if (!r.error.empty()) {
      std::snprintf(line, sizeof(line), "%-46s FAILED: %s\n", r.name.c_str(), r.error.c_str());
    } else if (r.limit.empty()) {
      std::snprintf(line, sizeof(line), "%-46s %10.3f %s\n", r.name.c_str(), r.value,
                    r.unit.c_str());
    } else if (r.floor.empty()) {
      std::snprintf(line, sizeof(line), "%-46s %10.3f %s   ratio %.3f to %s\n", r.name.c_str(),
                    r.value, r.unit.c_str(), r.value / by_name[r.limit], r.limit.c_str());
    } else {
      std::snprintf(line, sizeof(line), "%-46s %10.3f %s   ratio %.3f to %s, %.3f to %s\n",
                    r.name.c_str(), r.value, r.unit.c_str(), r.value / by_name[r.limit],
                    r.limit.c_str(), r.value / by_name[r.floor], r.floor.c_str());
    }
    os << line << std::flush;
  }
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  Flags f;
  CLI::App app{
      "Orrery object plane benchmarks, each with its ratio to a limit measured in the "
      "same run (docs/benchmarks.md \"Objects\")"};
  app.add_option("--mb", f.mb, "value size in MiB")->capture_default_str();
  app.add_option("--iterations", f.iterations, "timed runs per metric (median)")
      ->capture_default_str();
  app.add_option("--only", f.only, "groups: same_node, cross_node, refs, spill")->delimiter(',');
  app.add_option("--spill-gb", f.spill_gb, "GiB through the store in the spill run")
      ->capture_default_str();
  app.add_option("--spill-store-gb", f.spill_store_gb, "the spill run's store, GiB")
      ->capture_default_str();
  app.add_flag("--json", f.json, "JSON on stdout (the table on stderr)");
  CLI11_PARSE(app, argc, argv);
  std::vector<Outcome> results;
  auto add = [&](std::vector<Outcome> rs) {
    Print(f.json ? std::cerr : std::cout, rs);
    results.insert(results.end(), rs.begin(), rs.end());
  };
  orrery::Config c;
  c.log_level = "warn";
  c.object_store_memory = (long long)(6 * (f.mb << 20));
  f.token_file = "/tmp/orrery-object-bench-token-" + std::to_string(getpid());
  if (!orrery::security::WriteSecretFile(f.token_file, orrery::security::NewToken()).ok()) {
    std::fprintf(stderr, "cannot write %s\n", f.token_file.c_str());
    return 1;
  }
  c.token_file = f.token_file;
  try {
    orrery::Init(c);
    if (Selected(f, "same_node")) add(orrery::bench::RunSameNode(f));
    if (Selected(f, "cross_node")) add(orrery::bench::RunCrossNode(f));
    if (Selected(f, "refs")) add(orrery::bench::RunRefs(f));
    orrery::Shutdown();
    if (Selected(f, "spill")) add({RunSpill(f)});
  } catch (const std::exception& e) {
    results.push_back({"run", 0, "", "", e.what()});
    Print(std::cerr, {results.back()});
  }
  std::remove(f.token_file.c_str());
  bool failed = false;
  nlohmann::json j = nlohmann::json::object();
  std::map<std::string, double> by_name;
  for (const auto& r : results) by_name[r.name] = r.value;
  for (const auto& r : results) {
    failed |= !r.error.empty();
    j[r.name] = {{"value", r.value}, {"unit", r.unit}};
    if (!r.limit.empty() && by_name[r.limit] > 0) {
      j[r.name]["limit"] = r.limit;
      j[r.name]["ratio"] = r.value / by_name[r.limit];
    }
    if (!r.floor.empty() && by_name[r.floor] > 0) {
      j[r.name]["floor"] = r.floor;
      j[r.name]["floor_ratio"] = r.value / by_name[r.floor];
    }
    if (!r.error.empty()) j[r.name]["error"] = r.error;
  }
  if (f.json) std::cout << j.dump(2) << "\n";
  return failed ? 1 : 0;
}
