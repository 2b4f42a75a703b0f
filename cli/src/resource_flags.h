// The flags that say what a node offers (`orrery start` and `orrery node`): CPUs, memory,
// custom resources, labels and the memory monitor's settings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "orrery/config.h"

namespace CLI {
class App;
}  // namespace CLI

namespace orrery::cli {

struct ResourceFlags {
  int num_cpus = -1;
  double memory = -1;
  std::string resources_json;
  std::string labels;
  std::string memory_usage_threshold;  // as typed; validated by Parsed()
  std::string memory_monitor_refresh_ms;
  std::string prestarted_workers;   // as typed; validated by Parsed()
  std::string object_store_memory;  // as typed: bytes or with a K/M/G suffix
  std::string object_spill_dir;
  // Workers' and jobs' log files (docs/logs.md): where, and when one is rotated.
  std::string log_dir;
  std::string log_rotate_bytes;  // as typed: bytes or with a K/M/G suffix
  int log_rotate_backups = -1;   // -1: the node's default

  // Adds --num-cpus, --memory, --resources, --labels and the memory monitor's flags to `app`.
  void Add(CLI::App* app);
  // The values as a Config (the memory monitor's settings default to the environment, as a
  // driver's). Throws orrery::ConfigError on malformed values, naming the flag typed.
  orrery::Config Parsed() const;
  // The flags given, as arguments for `orrery node`.
  void AppendTo(std::vector<std::string>& argv) const;
  // --log-rotate-bytes as a number (0: the node's default). Throws orrery::ConfigError.
  uint64_t LogRotateBytes() const;
};

}  // namespace orrery::cli
