// The head's rebuild from the state store when it starts (docs/redis-schema.md "Head
// restart"). Every table is read first: a store that cannot be read fails the start (after
// a bounded retry) rather than passing for an empty one. Each manager then restores its own
// table (HeadManagers::Restore has the order). Every record read back is untrusted: one that
// does not decode is skipped with a warning.
#include <chrono>
#include <thread>

#include "core/internal/log.h"
#include "scheduler/internal/head_service.h"

namespace orrery::scheduler {

namespace {
// How long a starting head keeps trying to read a store that does not answer.
constexpr double kStoreReadTimeoutS = 10;
}  // namespace

Status HeadService::Recover() {
  double deadline = Now() + kStoreReadTimeoutS;
  auto tables = ReadTables(*m_.ctx.store);  // through the retention store: restored records expire
  while (!tables.ok() && Now() < deadline) {
    LOG_WARN("the head cannot read its state yet: " + tables.status().message());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the store's reconnect
    tables = ReadTables(*m_.ctx.store);
  }
  if (!tables.ok()) {
    return Status::Unavailable("the head cannot start without its state: " +
                               tables.status().message());
  }
  m_.Restore(tables.value(), Now());
  HeardRestored();  // each restored peer gets the whole tolerance to be heard from again
  if (m_.nodes.size() || m_.actors.size() || m_.pgs.size() || m_.leases.size()) {
    LOG_INFO("recovered " + std::to_string(m_.nodes.size()) + " nodes, " +
             std::to_string(m_.actors.size()) + " actors, " + std::to_string(m_.pgs.size()) +
             " placement groups and " + std::to_string(m_.leases.size()) +
             " leases from the state store");
  }
  return Status::Ok();
}

}  // namespace orrery::scheduler
