// orrery_train_bench: the training module's benchmarks (issue: Train), on the embedded
// default, each next to a limit measured in the same run.
//
//   fit_startup_s       Fit() called -> every one of 4 CPU workers running the loop (the
//                       latest worker's first line), median of --runs. Limit: the time to
//                       create 4 plain actors and get one answer from each (the floor of any
//                       actor-based group start).
//   allreduce_<n>MB     a 4-worker AllReduce (sum) of n MB of floats, 1 MB to 64 MB: bus
//                       bandwidth, 2(N-1)/N x bytes / time as NCCL's tests define it, over the
//                       loopback ZeroMQ bandwidth: one PUSH -> PULL stream of 1 MB messages
//                       between two threads with their own contexts over 127.0.0.1; and
//                       over memcpy_limit, one thread's memcpy of 64 MB between two
//                       pre-touched buffers (median of 5).
//
//   orrery_train_bench [--runs 5] [--workers 4] [--max-mb 64] [--json]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "orrery/train/train.h"

namespace {

using Clock = std::chrono::steady_clock;

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class Echo {
 public:
  static Echo* Create() { return new Echo(); }
  int Ping(int x) { return x; }
};
ORRERY_REMOTE(Echo::Create, &Echo::Ping);

// Every worker notes when its loop started; rank 0 reports the latest.
void StartupLoop(orrery::train::Context& ctx) {
  std::vector<double> started{Now()};
  ctx.AllReduce(started, orrery::train::ReduceOp::kMax);
  ctx.Report({{"latest_start", started[0]}});
}

// Times AllReduce of 1 MB .. max_mb MB of floats; rank 0 reports seconds per call by size.
void AllReduceLoop(orrery::train::Context& ctx) {
  int max_mb = ctx.Config().value("max_mb", 64);
  orrery::train::Metrics out;
  for (int mb = 1; mb <= max_mb; mb *= 4) {
    std::vector<float> data(size_t(mb) * 1024 * 1024 / sizeof(float), 1.0f);
    ctx.AllReduce(data);  // warm-up: connections, page faults
    const int reps = 10;
    ctx.Barrier();
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) ctx.AllReduce(data);
    ctx.Barrier();
    double s = std::chrono::duration<double>(Clock::now() - t0).count() / reps;
    if (data[0] != float(std::pow(ctx.WorldSize(), reps + 1)))
      throw std::runtime_error("wrong all-reduce result");
    out[std::to_string(mb)] = s;
  }
  ctx.Report(out);
}
ORRERY_REMOTE(StartupLoop, AllReduceLoop);

// Bytes per second of one ZeroMQ PUSH -> PULL stream over loopback TCP, 1 MB messages.
double ZmqBandwidth(size_t total_bytes) {
  zmq::context_t rctx(1), sctx(1);
  zmq::socket_t pull(rctx, zmq::socket_type::pull);
  pull.set(zmq::sockopt::rcvhwm, 0);
  pull.bind("tcp://127.0.0.1:*");
  std::string endpoint = pull.get(zmq::sockopt::last_endpoint);
  const size_t chunk = 1 << 20;
  size_t messages = total_bytes / chunk;
  auto run_once = [&] {
    std::thread sender([&] {
      zmq::socket_t push(sctx, zmq::socket_type::push);
      push.set(zmq::sockopt::sndhwm, 0);
      push.set(zmq::sockopt::linger, -1);
      push.connect(endpoint);
      std::vector<char> buf(chunk, 1);
      for (size_t i = 0; i < messages; ++i)
        push.send(zmq::const_buffer(buf.data(), buf.size()), zmq::send_flags::none);
    });
    auto t0 = Clock::now();
    std::vector<char> sink(chunk);
    for (size_t i = 0; i < messages; ++i) {
      zmq::message_t m;
      (void)pull.recv(m, zmq::recv_flags::none);
      std::memcpy(sink.data(), m.data(), std::min(m.size(), chunk));  // a receiver touches the data
    }
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    sender.join();
    return double(messages * chunk) / s;
  };
  run_once();  // warm-up
  double best = 0;
  for (int i = 0; i < 3; ++i) best = std::max(best, run_once());
  return best;
}

// Bytes per second of one thread's memcpy of 64 MB between pre-touched buffers, median of 5.
double MemcpyBandwidth() {
  const size_t n = size_t(64) << 20;
  std::vector<char> src(n, 1), dst(n, 2);
  std::vector<double> rates;
  for (int i = 0; i < 5; ++i) {
    auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), n);
    rates.push_back(double(n) / std::chrono::duration<double>(Clock::now() - t0).count());
  }
  if (dst[n / 2] != 1) std::abort();
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

orrery::train::Result FitQuiet(orrery::train::TrainLoop loop, int workers, nlohmann::json config) {
  orrery::train::ScalingConfig scaling;
  scaling.num_workers = workers;
  orrery::train::RunConfig run;
  run.verbose = 0;
  run.name = "bench";
  run.storage_path = (std::filesystem::temp_directory_path() / "orrery_train_bench").string();
  orrery::train::TorchTrainer trainer(loop, scaling, run, {}, std::move(config));
  auto r = trainer.Fit();
  r.ThrowIfError();
  return r;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  CLI::App app{"Orrery Train benchmarks"};
  int runs = 5, workers = 4, max_mb = 64;
  bool json = false;
  app.add_option("--runs", runs, "Fit() runs for fit_startup")->check(CLI::PositiveNumber);
  app.add_option("--workers", workers, "workers of the group")->check(CLI::Range(2, 64));
  app.add_option("--max-mb", max_mb, "largest all-reduce, MB (1, 4, 16, 64)")
      ->check(CLI::Range(1, 1024));
  app.add_flag("--json", json, "print one JSON document");
  CLI11_PARSE(app, argc, argv);

  orrery::Config config;
  config.num_cpus = workers;  // one CPU per worker on the embedded node, whatever the machine has
  orrery::Init(config);
  nlohmann::json doc;

  // fit_startup and its limit.
  std::vector<double> startup, actors;
  for (int i = 0; i < runs; ++i) {
    double t0 = Now();
    auto r = FitQuiet(StartupLoop, workers, nullptr);
    startup.push_back(r.metrics.at("latest_start") - t0);
    auto a0 = Clock::now();
    std::vector<orrery::ActorHandle<Echo>> group;
    for (int w = 0; w < workers; ++w) group.push_back(orrery::Actor(Echo::Create).Remote());
    for (auto& g : group) orrery::Get(g.Task(&Echo::Ping).Remote(1));
    actors.push_back(std::chrono::duration<double>(Clock::now() - a0).count());
    for (auto& g : group) g.Kill();
  }
  double fit_s = Median(startup), limit_s = Median(actors);
  std::fprintf(
      stderr,
      "fit_startup_s            %.3f s (median of %d; min %.3f)   limit %.3f s   ratio %.2f\n",
      fit_s, runs, *std::min_element(startup.begin(), startup.end()), limit_s, limit_s / fit_s);
  doc["fit_startup_s"] = {
      {"median", fit_s}, {"runs", startup}, {"limit_s", limit_s}, {"workers", workers}};

  // allreduce bandwidth and its limit.
  double zmq_bw = ZmqBandwidth(size_t(64) << 20);
  std::fprintf(stderr, "zmq_loopback_bandwidth   %.0f MB/s%s\n", zmq_bw / 1e6,
               std::getenv("ORRERY_COLLECTIVE_SHM")
                   ? "   (ORRERY_COLLECTIVE_SHM set: the ring over TCP)"
                   : "");
  doc["zmq_loopback_bandwidth_Bps"] = zmq_bw;
  double memcpy_bw = MemcpyBandwidth();
  std::fprintf(stderr, "memcpy_limit             %.0f MB/s\n", memcpy_bw / 1e6);
  doc["memcpy_limit_Bps"] = memcpy_bw;
  auto r = FitQuiet(AllReduceLoop, workers, {{"max_mb", max_mb}});
  std::vector<std::pair<int, double>> sizes;
  for (const auto& [key, s] : r.metrics) sizes.emplace_back(std::stoi(key), s);
  std::sort(sizes.begin(), sizes.end());
  for (const auto& [mb_int, s] : sizes) {
    std::string mb = std::to_string(mb_int);
    double bytes = std::stod(mb) * 1024 * 1024;
    double algbw = bytes / s, busbw = algbw * 2.0 * (workers - 1) / workers;
    std::fprintf(stderr,
                 "allreduce_%sMB%*s %.4f s   algbw %.0f MB/s   busbw %.0f MB/s   ratio %.2f   "
                 "ratio %.2f to memcpy_limit\n",
                 mb.c_str(), int(14 - mb.size()), "", s, algbw / 1e6, busbw / 1e6, busbw / zmq_bw,
                 busbw / memcpy_bw);
    doc["allreduce_" + mb + "MB"] = {{"seconds", s},
                                     {"algbw_Bps", algbw},
                                     {"busbw_Bps", busbw},
                                     {"ratio", busbw / zmq_bw},
                                     {"ratio_memcpy", busbw / memcpy_bw}};
  }
  if (json) std::cout << doc.dump(2) << "\n";
  orrery::Shutdown();
  return 0;
}
