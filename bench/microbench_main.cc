// orrery_microbench: Ray's microbenchmarks for Orrery, each compared with the raw ZeroMQ
// round-trip limit measured in the same run. See bench/README.md and docs/benchmarks.md.
//
//   orrery_microbench [--duration-s 5] [--warmup-s 1] [--rounds 4] [--batch 1000]
//                     [--actors 10] [--only NAME[,NAME...]] [--json] [--list]
//                     [--compare-insecure]
//
// Orrery runs with authentication and encryption (CURVE, docs/security.md) as by default.
// --compare-insecure also measures the actor-call metrics on an --insecure cluster in the
// same run, as <name>_insecure, and prints the ratio secure / insecure of each.
// Prints one line per metric: operations per second (mean +- standard deviation over the
// rounds, as Ray's timeit) and the ratio to zmq_roundtrip_limit. With --json the lines go to
// stderr and stdout gets one JSON document. Exits 1 when a metric failed.
#include <orrery/orrery.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "host_limits.h"
#include "metrics.h"
#include "zmq_limit.h"

namespace {

using orrery::bench::Rate;

constexpr const char* kLimitName = "zmq_roundtrip_limit";

// The host's other limits (bench/host_limits.h), measured after kLimitName, in this order.
struct HostLimit {
  const char* name;
  const char* definition;
};
constexpr HostLimit kHostLimits[] = {
    {"ipc_roundtrip_limit", "the same ZeroMQ round trips over ipc:// (a Unix domain socket)"},
    {"tcp_roundtrip_limit", "a plain TCP ping-pong of 2 bytes between two processes, no ZeroMQ"},
    {"shm_roundtrip_limit",
     "a ping-pong through a shared page, each side waking the other by futex"},
    {"process_spawn_limit",
     "fork of a 12 MB process (a zygote) whose child writes 1.1 MB of its pages and 1.1 MB of "
     "fresh ones (a worker's private memory), then exits"},
};

// Each metric that the table also reads against another limit than kLimitName.
constexpr std::pair<const char*, const char*> kAlsoAgainst[] = {
    {"1_1_actor_calls_sync", "tcp_roundtrip_limit"},
    {"1_1_actor_calls_sync", "ipc_roundtrip_limit"},
    {"1_1_actor_calls_sync", "shm_roundtrip_limit"},
    {"single_client_tasks_sync", "tcp_roundtrip_limit"},
    {"actor_creation", "process_spawn_limit"},
    {"actor_creation_burst_32", "process_spawn_limit"},
    {"actor_creation_1000", "process_spawn_limit"},
};

bool IsLimit(const std::string& name) {
  if (name == kLimitName) return true;
  for (const auto& l : kHostLimits)
    if (name == l.name) return true;
  return false;
}

orrery::bench::Rate MeasureHostLimit(const std::string& name,
                                     const orrery::bench::TimingOptions& timing) {
  if (name == "ipc_roundtrip_limit") return orrery::bench::MeasureZmqRoundTrip(timing, true);
  if (name == "tcp_roundtrip_limit") return orrery::bench::MeasureTcpRoundTrip(timing);
  if (name == "shm_roundtrip_limit") return orrery::bench::MeasureShmRoundTrip(timing);
  return orrery::bench::MeasureProcessSpawn(timing, orrery::bench::SpawnShape{});
}

struct Outcome {
  std::string name;
  bool ok = false;
  Rate rate;
  std::string error;
};

std::vector<std::string> SplitCsv(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    std::stringstream ss(item);
    std::string part;
    while (std::getline(ss, part, ',')) {
      if (!part.empty()) out.push_back(part);
    }
  }
  return out;
}

std::string MachineLine() {
  struct utsname u {};
  uname(&u);
  std::ostringstream os;
  os << u.sysname << " " << u.release << " " << u.machine << ", "
     << std::thread::hardware_concurrency() << " cores";
  return os.str();
}

void PrintLine(std::ostream& os, const Outcome& o, double limit) {
  char buf[256];
  if (!o.ok) {
    std::snprintf(buf, sizeof(buf), "%-28s FAILED: %s\n", o.name.c_str(), o.error.c_str());
  } else if (IsLimit(o.name)) {
    std::snprintf(buf, sizeof(buf), "%-28s %12.1f ops/s +- %9.1f   (the limit)\n", o.name.c_str(),
                  o.rate.mean, o.rate.sd);
  } else if (limit > 0) {
    std::snprintf(buf, sizeof(buf), "%-28s %12.1f ops/s +- %9.1f   ratio %.3f\n", o.name.c_str(),
                  o.rate.mean, o.rate.sd, o.rate.mean / limit);
  } else {
    std::snprintf(buf, sizeof(buf), "%-28s %12.1f ops/s +- %9.1f   ratio n/a\n", o.name.c_str(),
                  o.rate.mean, o.rate.sd);
  }
  os << buf;
  for (const auto& [key, value] : o.rate.extra) os << "    " << key << " " << value << "\n";
  os << std::flush;
}

template <typename F>
Outcome Measure(const std::string& name, F&& run) {
  Outcome o;
  o.name = name;
  try {
    o.rate = run();
    o.ok = o.rate.mean > 0;
    if (!o.ok) o.error = "no operation completed";
  } catch (const orrery::Error& e) {
    o.error = std::string(e.kind()) + ": " + e.what();
  } catch (const std::exception& e) {
    o.error = e.what();
  }
  return o;
}

struct Flags {
  orrery::bench::MetricOptions opt;
  std::vector<std::string> only_args;
  bool json = false;
  bool list = false;
  bool compare_insecure = false;
};

// Parses the command line into `f`; an exit code when the program must end now (a bad flag,
// --help), else -1.
int ParseFlags(int argc, char** argv, Flags* f) {
  CLI::App app{
      "Orrery microbenchmarks (Ray's metric names), each with its ratio to the raw "
      "ZeroMQ round-trip rate between two processes measured in the same run."};
  app.add_option("--duration-s", f->opt.timing.duration_s, "measured seconds per metric")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup-s", f->opt.timing.warmup_s, "warm-up seconds per metric")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rounds", f->opt.timing.rounds, "rounds the measured time is split into")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", f->opt.batch, "calls per batch in the async and concurrent metrics")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--actors", f->opt.actors, "actors created per step of actor_creation")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--only", f->only_args, "run only these metrics (comma-separated or repeated)");
  app.add_flag("--json", f->json, "write the results to stdout as JSON (the table goes to stderr)");
  app.add_flag("--list", f->list, "list the metrics and exit");
  app.add_flag(
      "--compare-insecure", f->compare_insecure,
      "also measure the actor-call metrics without CURVE (as NAME_insecure) and print the ratio");
  app.allow_extras();  // --orrery-* flags are Orrery's (orrery::Init consumes them)
  try {
    app.parse(argc, argv);
    // Left over: --orrery-key=value, or --orrery-key followed by its value.
    std::vector<std::string> extras = app.remaining();
    for (size_t i = 0; i < extras.size(); ++i) {
      if (extras[i].rfind("--orrery-", 0) != 0) throw CLI::ExtrasError({extras[i]});
      if (extras[i].find('=') == std::string::npos && i + 1 < extras.size() &&
          extras[i + 1].rfind("--", 0) != 0) {
        ++i;
      }
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return -1;
}

void ListMetrics() {
  for (const auto& m : orrery::bench::Metrics())
    std::cout << m.name << "\t" << m.definition << "\n";
  std::cout << kLimitName
            << "\tsynchronous ZeroMQ DEALER->ROUTER round trips between two processes over "
               "loopback TCP\n";
  for (const auto& l : kHostLimits) std::cout << l.name << "\t" << l.definition << "\n";
}

// The metrics --only names; false (after saying which) when one is unknown.
bool ResolveOnly(const std::vector<std::string>& only_args, std::set<std::string>* only) {
  std::vector<std::string> all = {kLimitName};
  for (const auto& l : kHostLimits) all.push_back(l.name);
  for (const auto& m : orrery::bench::Metrics()) all.push_back(m.name);
  for (const auto& name : SplitCsv(only_args)) {
    if (std::find(all.begin(), all.end(), name) == all.end()) {
      std::cerr << "unknown metric '" << name << "'; known: ";
      for (const auto& n : all) std::cerr << n << " ";
      std::cerr << "\n";
      return false;
    }
    only->insert(name);
  }
  return true;
}

// The embedded cluster the metrics run on; `insecure`: without CURVE.
bool InitCluster(bool insecure, int argc, char** argv) {
  orrery::Config config;
  config.resources[orrery::bench::kActorResource] = orrery::bench::kActorResourceCapacity;
  config.insecure = insecure;
  config.prestarted_workers = orrery::bench::kBurstActors;  // actor_creation_burst_32
  try {
    orrery::Init(config, argc, argv);
    return true;
  } catch (const orrery::Error& e) {
    std::cerr << "orrery::Init" << (insecure ? " (insecure)" : "") << " failed: " << e.kind()
              << ": " << e.what() << "\n";
    return false;
  }
}

// The cost of CURVE: the actor-call metrics again, on the insecure cluster that runs now.
// Returns (metric, secure ops/s over insecure ops/s) for those measured both ways.
std::vector<std::pair<std::string, double>> MeasureInsecure(const orrery::bench::MetricOptions& opt,
                                                            const std::set<std::string>& only,
                                                            double limit_rate, std::ostream& table,
                                                            std::vector<Outcome>* outcomes) {
  std::vector<std::pair<std::string, double>> curve_ratios;
  for (const auto& m : orrery::bench::Metrics()) {
    const std::string name = m.name;
    if ((!only.empty() && !only.count(name)) ||
        (name != "1_1_actor_calls_sync" && name != "1_1_actor_calls_async"))
      continue;
    Outcome o = Measure(name + "_insecure", [&] { return m.run(opt); });
    PrintLine(table, o, limit_rate);
    for (const auto& secure : *outcomes) {
      if (secure.name == name && secure.ok && o.ok)
        curve_ratios.emplace_back(name, secure.rate.mean / o.rate.mean);
    }
    outcomes->push_back(o);
  }
  return curve_ratios;
}

// The rate of each limit that was measured, by name.
using LimitRates = std::vector<std::pair<std::string, double>>;

// Prints each metric of kAlsoAgainst that ran against its other limit.
void PrintOtherRatios(std::ostream& table, const std::vector<Outcome>& outcomes,
                      const LimitRates& limits) {
  for (const auto& [metric, limit] : kAlsoAgainst) {
    for (const auto& o : outcomes) {
      if (o.name != metric || !o.ok) continue;
      for (const auto& [name, rate] : limits) {
        if (name != limit || rate <= 0) continue;
        char buf[160];
        std::snprintf(buf, sizeof(buf), "%-28s ratio %.3f to %s\n", metric, o.rate.mean / rate,
                      limit);
        table << buf;
      }
    }
  }
}

void PrintJson(const Flags& f, double limit_rate, const LimitRates& limits,
               const std::vector<Outcome>& outcomes,
               const std::vector<std::pair<std::string, double>>& curve_ratios) {
  nlohmann::json doc;
  doc["machine"] = MachineLine();
  doc["options"] = {{"duration_s", f.opt.timing.duration_s},
                    {"warmup_s", f.opt.timing.warmup_s},
                    {"rounds", f.opt.timing.rounds},
                    {"batch", f.opt.batch},
                    {"actors", f.opt.actors},
                    {"concurrency", f.opt.concurrency}};
  doc["limit"] = {{"name", kLimitName}, {"ops_per_s", limit_rate}};
  nlohmann::json limit_doc = nlohmann::json::object();
  for (const auto& [name, rate] : limits) limit_doc[name] = rate;
  doc["limits"] = limit_doc;  // every limit's ops/s, kLimitName's included
  nlohmann::json results = nlohmann::json::array();
  for (const auto& o : outcomes) {
    nlohmann::json r = {{"name", o.name}, {"ok", o.ok}};
    if (o.ok) {
      r["ops_per_s"] = o.rate.mean;
      r["sd"] = o.rate.sd;
      r["ratio"] = limit_rate > 0 ? nlohmann::json(o.rate.mean / limit_rate) : nlohmann::json();
      nlohmann::json ratios = nlohmann::json::object();  // against each limit
      if (!IsLimit(o.name)) {
        for (const auto& [name, rate] : limits)
          if (rate > 0) ratios[name] = o.rate.mean / rate;
      }
      r["ratios"] = ratios;
      if (!o.rate.extra.empty()) r["extra"] = o.rate.extra;
    } else {
      r["error"] = o.error;
    }
    results.push_back(r);
  }
  doc["results"] = results;
  if (f.compare_insecure) {
    nlohmann::json ratios = nlohmann::json::object();
    for (const auto& [name, ratio] : curve_ratios) ratios[name] = ratio;
    doc["curve_ratio"] = ratios;  // secure ops/s over insecure ops/s, per metric
  }
  std::cout << doc.dump(2) << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  // The echo server of the ZeroMQ limit is this executable re-run; it never starts Orrery.
  if (argc >= 2 && std::string(argv[1]) == orrery::bench::kEchoServerFlag) {
    return orrery::bench::RunZmqEchoServer(argc >= 3 ? argv[2] : "0");
  }
  // Orrery's workers are this executable re-run too: in a worker this serves and exits.
  orrery::RunWorkerIfRequested(argc, argv);

  Flags f;
  if (int rc = ParseFlags(argc, argv, &f); rc >= 0) return rc;
  if (f.list) {
    ListMetrics();
    return 0;
  }
  std::set<std::string> only;
  if (!ResolveOnly(f.only_args, &only)) return 2;
  auto wanted = [&](const std::string& name) { return only.empty() || only.count(name) > 0; };
  std::ostream& table = f.json ? std::cerr : std::cout;
  const auto& opt = f.opt;
  table << "orrery_microbench: " << MachineLine() << "; " << opt.timing.duration_s
        << " s measured in " << opt.timing.rounds << " rounds after " << opt.timing.warmup_s
        << " s warm-up per metric\n";

  std::vector<Outcome> outcomes;
  // The limit is measured always (every ratio needs it), first, before Orrery starts.
  Outcome limit =
      Measure(kLimitName, [&] { return orrery::bench::MeasureZmqRoundTrip(opt.timing); });
  PrintLine(table, limit, 0);
  if (wanted(kLimitName)) outcomes.push_back(limit);
  const double limit_rate = limit.ok ? limit.rate.mean : 0;
  LimitRates limits = {{kLimitName, limit_rate}};
  bool limits_ok = limit.ok;
  for (const auto& l : kHostLimits) {
    Outcome o = Measure(l.name, [&] { return MeasureHostLimit(l.name, opt.timing); });
    PrintLine(table, o, 0);
    if (wanted(l.name)) outcomes.push_back(o);
    limits.emplace_back(l.name, o.ok ? o.rate.mean : 0);
    limits_ok = limits_ok && o.ok;
  }

  bool any_orrery = false;
  for (const auto& m : orrery::bench::Metrics()) any_orrery = any_orrery || wanted(m.name);
  if (any_orrery) {
    if (!InitCluster(false, argc, argv)) return 1;
    for (const auto& m : orrery::bench::Metrics()) {
      if (!wanted(m.name)) continue;
      Outcome o = Measure(m.name, [&] { return m.run(opt); });
      PrintLine(table, o, limit_rate);
      outcomes.push_back(o);
    }
    orrery::Shutdown();
  }
  std::vector<std::pair<std::string, double>> curve_ratios;
  if (f.compare_insecure && any_orrery) {
    if (!InitCluster(true, argc, argv)) return 1;
    curve_ratios = MeasureInsecure(opt, only, limit_rate, table, &outcomes);
    orrery::Shutdown();
    for (const auto& [name, ratio] : curve_ratios) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "%-28s with CURVE / without: %.3f\n", name.c_str(), ratio);
      table << buf;
    }
  }

  PrintOtherRatios(table, outcomes, limits);
  bool failed = !limits_ok;
  for (const auto& o : outcomes) failed = failed || !o.ok;
  if (f.json) PrintJson(f, limit_rate, limits, outcomes, curve_ratios);
  return failed ? 1 : 0;
}
