// Providers add and remove the autoscaler's nodes (docs/autoscaler.md): `local` runs `orrery
// node` processes on this host; `command` runs the user's shell commands (a cloud's CLI,
// `kubectl scale`), with the node's name and group in the environment.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autoscaler/src/config.h"

namespace orrery::autoscaler {

// One unit to add or remove: a node, or a TPU slice's hosts.
struct Unit {
  const GroupConfig* group = nullptr;
  std::vector<std::string> names;  // node names (a slice: "<slice>-<host>")
  std::string slice;               // a TPU group's slice name, else ""
  int group_size = 0;              // the group's nodes (slices) after this change
};

class Provider {
 public:
  virtual ~Provider() = default;
  virtual Status Create(const Unit& unit) = 0;
  virtual Status Remove(const Unit& unit) = 0;
  // Reaps what ended; the names of local nodes whose process exited on its own.
  virtual std::vector<std::string> Reap() { return {}; }
  // The autoscaler stops: a local provider stops its nodes.
  virtual void Shutdown() {}
};

// `head`: where the nodes join; `orrery_path`: the orrery executable (local); `env`: what the
// nodes (local) or commands get besides their own variables.
// `node_args`: added to each local `orrery node` command line (--insecure).
std::unique_ptr<Provider> MakeProvider(const ProviderConfig& config, const std::string& head,
                                       const std::string& orrery_path,
                                       std::map<std::string, std::string> env,
                                       std::vector<std::string> node_args);

// The environment of a unit's node `host` (TPU_* for a slice's host) or command.
std::map<std::string, std::string> UnitEnv(const Unit& unit, size_t host, const std::string& head);

}  // namespace orrery::autoscaler
