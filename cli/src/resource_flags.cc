#include "cli/src/resource_flags.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdlib>
#include <map>

#include "orrery/errors.h"
#include "orrery/orrery.h"
#include "orrery/resources.h"

namespace orrery::cli {

void ResourceFlags::Add(CLI::App* app) {
  app->add_option("--num-cpus", num_cpus, "CPUs this node offers (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--memory", memory, "memory this node offers, in bytes")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--resources", resources_json, "custom resources as JSON, e.g. '{\"GPU\": 2}'");
  app->add_option("--labels", labels, "node labels: k=v,k2=v2");
  app->add_option("--memory-usage-threshold", memory_usage_threshold,
                  "kill a worker when more than this fraction of memory is in use, 0 < t <= 1 "
                  "(default $ORRERY_MEMORY_USAGE_THRESHOLD, else 0.95)");
  app->add_option("--memory-monitor-refresh-ms", memory_monitor_refresh_ms,
                  "how often the memory monitor reads memory; 0: it kills nothing "
                  "(default $ORRERY_MEMORY_MONITOR_REFRESH_MS, else 250)");
  app->add_option("--prestarted-workers", prestarted_workers,
                  "started workers kept without an assignment per executable, for bursts of "
                  "actors and tasks; 0: none (default $ORRERY_PRESTARTED_WORKERS, else 16)");
  app->add_option("--object-store-memory", object_store_memory,
                  "the shared-memory object store's capacity: bytes, or with a K, M or G suffix "
                  "(default $ORRERY_OBJECT_STORE_MEMORY, else 30% of memory)");
  app->add_option("--object-spill-dir", object_spill_dir,
                  "where objects spill when the store is full (default $ORRERY_OBJECT_SPILL_DIR, "
                  "else $ORRERY_TMPDIR/spill)");
  app->add_option("--log-dir", log_dir,
                  "where workers' and jobs' stdout and stderr files go (default: the session's "
                  "logs directory)");
  app->add_option("--log-rotate-bytes", log_rotate_bytes,
                  "rotate a worker's log file past this size: bytes, or with a K, M or G suffix "
                  "(default 100M)");
  app->add_option("--log-rotate-backups", log_rotate_backups,
                  "rotated copies kept per log file (default 5)")
      ->check(CLI::Range(0, 1000));
}

uint64_t ResourceFlags::LogRotateBytes() const {
  if (log_rotate_bytes.empty()) return 0;
  long long v = orrery::ParseByteSize("--log-rotate-bytes", log_rotate_bytes);
  if (v < 4096) throw orrery::ConfigError("--log-rotate-bytes: must be at least 4K");
  return uint64_t(v);
}

orrery::Config ResourceFlags::Parsed() const {
  std::vector<std::string> args{"orrery"};
  if (!resources_json.empty()) args.push_back("--orrery-resources=" + resources_json);
  if (!labels.empty()) args.push_back("--orrery-labels=" + labels);
  // The memory monitor's settings: the flag, else the environment (as a driver's Config).
  std::map<std::string, std::string> typed = {{"--orrery-resources", "--resources"},
                                              {"--orrery-labels", "--labels"}};
  for (auto [name, value] :
       {std::pair{std::string("memory-usage-threshold"), memory_usage_threshold},
        std::pair{std::string("memory-monitor-refresh-ms"), memory_monitor_refresh_ms},
        std::pair{std::string("prestarted-workers"), prestarted_workers},
        std::pair{std::string("object-store-memory"), object_store_memory},
        std::pair{std::string("object-spill-dir"), object_spill_dir}}) {
    std::string from = "--" + name;
    if (value.empty()) {
      std::string env = "ORRERY_";
      for (char ch : name) env.push_back(ch == '-' ? '_' : char(std::toupper(ch)));
      const char* v = std::getenv(env.c_str());
      if (!v || !*v) continue;
      value = v;
      from = env;
    }
    args.push_back("--orrery-" + name + "=" + value);
    typed["--orrery-" + name] = from;
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = int(args.size());
  orrery::Config c;
  try {
    c = orrery::ApplyFlags(orrery::Config{}, &argc, argv.data());
  } catch (const orrery::ConfigError& e) {
    // Name the flag the user typed, not the --orrery-* form used to parse it.
    std::string m = e.what();
    for (const auto& [internal, shown] : typed) {
      size_t at = m.find(internal);
      if (at != std::string::npos) m.replace(at, internal.size(), shown);
    }
    throw orrery::ConfigError(m);
  }
  orrery::Status s = orrery::ValidateResources(c.resources);
  if (!s.ok()) throw orrery::ConfigError("--resources: " + s.message());
  return c;
}

void ResourceFlags::AppendTo(std::vector<std::string>& argv) const {
  if (num_cpus >= 0) argv.insert(argv.end(), {"--num-cpus", std::to_string(num_cpus)});
  if (memory >= 0) argv.insert(argv.end(), {"--memory", std::to_string((long long)memory)});
  if (!resources_json.empty()) argv.insert(argv.end(), {"--resources", resources_json});
  if (!labels.empty()) argv.insert(argv.end(), {"--labels", labels});
  if (!memory_usage_threshold.empty())
    argv.insert(argv.end(), {"--memory-usage-threshold", memory_usage_threshold});
  if (!memory_monitor_refresh_ms.empty()) {
    argv.insert(argv.end(), {"--memory-monitor-refresh-ms", memory_monitor_refresh_ms});
  }
  if (!prestarted_workers.empty())
    argv.insert(argv.end(), {"--prestarted-workers", prestarted_workers});
  if (!object_store_memory.empty())
    argv.insert(argv.end(), {"--object-store-memory", object_store_memory});
  if (!object_spill_dir.empty()) argv.insert(argv.end(), {"--object-spill-dir", object_spill_dir});
  if (!log_dir.empty()) argv.insert(argv.end(), {"--log-dir", log_dir});
  if (!log_rotate_bytes.empty()) argv.insert(argv.end(), {"--log-rotate-bytes", log_rotate_bytes});
  if (log_rotate_backups >= 0)
    argv.insert(argv.end(), {"--log-rotate-backups", std::to_string(log_rotate_backups)});
}

}  // namespace orrery::cli
