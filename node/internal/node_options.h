// A node's options from its host: what the embedded node (actors/src/api.cc) and `orrery
// node` (cli/src/daemons.cc) both start from, before each adds its addresses and workers.
#pragma once

#include "node/internal/node_service.h"
#include "orrery/config.h"
#include "orrery/status.h"

namespace orrery::node {

// What the user says of the host; the rest is read from it.
struct HostResources {
  int num_cpus = -1;    // CPU; -1: the host's cores (at least 1)
  double memory = -1;   // memory in bytes (0: none advertised); -1: the host's physical memory
  Resources resources;  // more resources, or other amounts of CPU and memory
  Labels labels;
};

// NodeOptions with resources CPU and memory (as `host` says, else the host's), then
// host.resources, and labels host.labels; then what accelerator detection finds on this host
// (core/internal/accelerators.h AddDetected: what is already there wins). Fails, with a
// message that starts "accelerator detection: ", when detection does.
Result<NodeOptions> NodeOptionsFromHost(const HostResources& host);

}  // namespace orrery::node
