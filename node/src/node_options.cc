#include "node/internal/node_options.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "core/internal/accelerators.h"

namespace orrery::node {

namespace {
double PhysicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? double(pages) * double(page) : 0;
}
}  // namespace

Result<NodeOptions> NodeOptionsFromHost(const HostResources& host) {
  NodeOptions no;
  no.resources["CPU"] =
      host.num_cpus >= 0 ? host.num_cpus : int(std::max(1u, std::thread::hardware_concurrency()));
  double memory = host.memory >= 0 ? host.memory : PhysicalMemoryBytes();
  if (memory > 0) no.resources["memory"] = memory;
  for (const auto& [k, v] : host.resources) no.resources[k] = v;
  no.labels = host.labels;
  if (Status st = accel::AddDetected(&no.resources, &no.labels, &no.accelerator_ids); !st.ok()) {
    return Status(st.code(), "accelerator detection: " + st.message());
  }
  return no;
}

}  // namespace orrery::node
