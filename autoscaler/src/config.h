// The autoscaler's configuration file (docs/autoscaler.md): node groups, each a node shape
// (resources, labels, or a whole TPU slice), min/max counts and an idle timeout, and the
// provider that adds and removes their nodes. Parsed strictly: an unknown field, a wrong
// type or an impossible value is an error that says what to change.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/internal/protocol_autoscaler.h"
#include "orrery/resources.h"
#include "orrery/status.h"

namespace orrery::autoscaler {

struct ProviderConfig {
  std::string type = "local";  // "local" or "command"
  std::string create, remove;  // command: shell commands (sh -c)
  double timeout_s = 120;      // command: how long one may run
};

struct TpuSlice {
  std::string pod_type;          // "v4-16"
  std::string topology;          // "2x2x2", canonical
  std::string accelerator_type;  // "TPU-V4"
  int hosts = 0;
  int chips_per_host = 0;
};

struct GroupConfig {
  std::string name;
  Resources resources;  // per node (a TPU host's chips are added: TPU: chips_per_host)
  Labels labels;
  int min = 0, max = 0;  // nodes; slices for a TPU group
  double idle_timeout_s = 60;
  bool is_tpu = false;
  TpuSlice tpu;
  ProviderConfig provider;

  int hosts() const { return is_tpu ? tpu.hosts : 1; }
  // What the head is told of it: the node shape, with a slice's first host's extra resource.
  proto::AutoscalerGroupMsg Shape() const;
};

struct Config {
  double interval_s = 2;
  double launch_timeout_s = 120;  // a node not registered this long after its launch failed
  std::vector<GroupConfig> groups;
};

// Label keys the autoscaler puts on the nodes it starts, to find them again.
inline constexpr const char* kGroupLabel = "orrery.io/autoscaler-group";
inline constexpr const char* kNodeLabel = "orrery.io/autoscaler-node";

Result<Config> ParseConfig(const std::string& yaml_text);
Result<Config> LoadConfig(const std::string& path);

}  // namespace orrery::autoscaler
