// orrery_transfer_bench: the object data channel (objects/internal/object_transfer.h) next to the
// limit it runs on, both in this process over loopback TCP.
//
//   raw_tcp_Bps        one TCP stream of N bytes: send() from one pre-touched buffer, recv()
//                      into another, blocking sockets, nothing else on the path. The limit.
//   pull_Bps           PullObject of the same N bytes from an ObjectServer (authenticated with
//                      a key, as in a secure cluster) into a pre-touched buffer.
//   cross_node_transfer_ratio   pull_Bps / raw_tcp_Bps (the target is >= 0.5).
//   small_pull_us      PullObject of 128 KiB (a new connection, its handshake, one request):
//                      what a small object pays beyond its bytes.
//
// Each is the median of --runs timed runs, the two interleaved, after one warm-up run of each.
//
//   orrery_transfer_bench [--bytes 1073741824] [--runs 3] [--chunk-bytes 4194304]
//                         [--parallel 2] [--in-flight 2] [--sockbuf 0] [--json]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "bench/object_bench_limits.h"
#include "objects/internal/object_transfer.h"
#include "objects/internal/object_transfer_wire.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace rt = orrery::objects;

// A buffer whose pages are all mapped before the timing starts.
std::vector<char> Touched(size_t n, char fill) { return std::vector<char>(n, fill); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double PullSeconds(const std::string& address, const orrery::ObjectId& id, std::vector<char>& dst,
                   uint64_t size, const rt::PullOptions& options, const rt::TransferKey& key) {
  auto t0 = Clock::now();
  orrery::Status s = rt::PullObject(address, id, size, dst.data(), options, key);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!s.ok()) {
    std::fprintf(stderr, "PullObject failed: %s\n", s.ToString().c_str());
    std::exit(1);
  }
  return secs;
}

struct Flags {
  uint64_t bytes = uint64_t(1) << 30;
  int runs = 3, parallel = 2, in_flight = 2, sockbuf = 0;
  uint64_t chunk = 4 << 20;
  bool json = false;
};

struct Results {
  std::vector<double> raw, pull, small;  // seconds per run
  uint64_t small_bytes = 0;
};

// A server holding one object: the first `size` bytes of `bytes`.
std::unique_ptr<rt::ObjectServer> ServeOne(const orrery::ObjectId& id, const char* bytes,
                                           uint64_t size, const rt::TransferKey& key) {
  auto server = std::make_unique<rt::ObjectServer>(
      [=](const orrery::ObjectId& want) -> orrery::Result<rt::ObjectBytes> {
        if (want != id) return orrery::Status::NotFound("no such object");
        return rt::ObjectBytes{bytes, size, nullptr};
      },
      key);
  if (orrery::Status s = server->Start("127.0.0.1"); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    std::exit(1);
  }
  return server;
}

void CheckSame(const std::vector<char>& src, const std::vector<char>& dst) {
  if (std::memcmp(src.data(), dst.data(), src.size()) != 0) {
    std::fprintf(stderr, "PullObject delivered wrong bytes\n");
    std::exit(1);
  }
}

Results Measure(const Flags& f) {
  std::vector<char> src = Touched(f.bytes, 'a'), dst = Touched(f.bytes, 'b');
  for (size_t i = 0; i < f.bytes; i += 4096) src[i] = char(i / 4096);  // not all one value
  rt::TransferKey key{true, std::string(32, 'k')};
  orrery::ObjectId id = orrery::ObjectId::Random();
  auto server = ServeOne(id, src.data(), f.bytes, key);
  rt::PullOptions options;
  options.chunk_bytes = f.chunk;
  options.parallel = f.parallel;
  Results r;
  orrery::bench::RawTcpSeconds(src, dst);  // warm-up
  std::fill(dst.begin(), dst.end(), 'b');
  PullSeconds(server->address(), id, dst, f.bytes, options, key);  // warm-up
  CheckSame(src, dst);
  // Interleaved, so a change in the machine's load falls on both alike.
  for (int i = 0; i < f.runs; ++i) {
    r.raw.push_back(orrery::bench::RawTcpSeconds(src, dst));
    std::fill(dst.begin(), dst.end(), char('c' + i));  // what the pull does not write shows
    r.pull.push_back(PullSeconds(server->address(), id, dst, f.bytes, options, key));
    CheckSame(src, dst);
  }
  // A small object's pull, where the connection and its handshake dominate.
  r.small_bytes = std::min<uint64_t>(f.bytes, 128 << 10);
  orrery::ObjectId small_id = orrery::ObjectId::Random();
  auto small_server = ServeOne(small_id, src.data(), r.small_bytes, key);
  for (int i = 0; i < 200; ++i) {
    r.small.push_back(
        PullSeconds(small_server->address(), small_id, dst, r.small_bytes, options, key));
  }
  return r;
}

void Print(const Flags& f, const Results& r) {
  double raw_bps = double(f.bytes) / Median(r.raw), pull_bps = double(f.bytes) / Median(r.pull);
  double small_us = Median(r.small) * 1e6;
  std::ostream& table = f.json ? std::cerr : std::cout;
  char line[256];
  std::snprintf(line, sizeof(line),
                "raw_tcp_stream            %8.2f GB/s   (%llu bytes, median of %d)\n",
                raw_bps / 1e9, (unsigned long long)f.bytes, f.runs);
  table << line;
  std::snprintf(line, sizeof(line),
                "pull_object               %8.2f GB/s   (chunk %llu, parallel %d, in flight %d)\n",
                pull_bps / 1e9, (unsigned long long)f.chunk, f.parallel, f.in_flight);
  table << line;
  std::snprintf(line, sizeof(line), "cross_node_transfer_ratio %8.2f\n", pull_bps / raw_bps);
  table << line;
  std::snprintf(line, sizeof(line),
                "small_pull_us             %8.0f us   (%llu bytes: connect, handshake, one "
                "request; median of 200)\n",
                small_us, (unsigned long long)r.small_bytes);
  table << line;
  if (!f.json) return;
  nlohmann::json doc = {
      {"cross_node_transfer_ratio", pull_bps / raw_bps},
      {"raw_tcp_Bps", raw_bps},
      {"pull_Bps", pull_bps},
      {"raw_tcp_seconds", r.raw},
      {"pull_seconds", r.pull},
      {"small_pull_us", small_us},
      {"small_pull_bytes", r.small_bytes},
      {"bytes", f.bytes},
      {"chunk_bytes", f.chunk},
      {"parallel", f.parallel},
      {"in_flight", f.in_flight},
      {"sockbuf", f.sockbuf},
  };
  std::cout << doc.dump(2) << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Orrery object transfer benchmark"};
  Flags f;
  app.add_option("--bytes", f.bytes, "bytes per transfer")->check(CLI::Range(1ull, 1ull << 36));
  app.add_option("--runs", f.runs, "timed runs of each (the median is reported)")
      ->check(CLI::Range(1, 100));
  app.add_option("--chunk-bytes", f.chunk, "PullOptions::chunk_bytes")
      ->check(CLI::Range(uint64_t(4096), uint64_t(64) << 20));
  app.add_option("--parallel", f.parallel, "PullOptions::parallel")->check(CLI::Range(1, 16));
  app.add_option("--in-flight", f.in_flight, "requests in flight per connection")
      ->check(CLI::Range(1, 64));
  app.add_option("--sockbuf", f.sockbuf,
                 "SO_SNDBUF/SO_RCVBUF of the channel's sockets (0: kernel autotuning)")
      ->check(CLI::Range(0, 1 << 30));
  app.add_flag("--json", f.json, "write the results to stdout as JSON (the table goes to stderr)");
  CLI11_PARSE(app, argc, argv);
  rt::transfer::SetRequestsInFlight(f.in_flight);
  rt::transfer::SetSocketBufferBytes(f.sockbuf);
  Print(f, Measure(f));
  return 0;
}
