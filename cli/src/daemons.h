// The head and node daemons that `orrery start` launches (`orrery head ...`,
// `orrery node ...`). Each runs until SIGTERM or SIGINT.
#pragma once

#include <string>

#include "orrery/config.h"

namespace orrery::cli {

struct HeadFlags {
  std::string bind = "127.0.0.1";
  int port = 6380;
  std::string redis_address;
  double health_period_s = 1.0;
  int health_threshold = 5;
};

struct NodeFlags {
  std::string address;  // head host:port
  std::string bind = "127.0.0.1";
  int num_cpus = -1;
  double memory = -1;
  Resources resources;
  Labels labels;
  double heartbeat_s = 1.0;
  double memory_usage_threshold = 0.95;
  int memory_monitor_refresh_ms = 250;
};

int RunHead(const HeadFlags& flags);
int RunNode(const NodeFlags& flags);

}  // namespace orrery::cli
