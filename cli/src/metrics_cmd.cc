#include "cli/src/metrics_cmd.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/src/metrics_targets.h"
#include "cli/src/session.h"
#include "core/internal/redis_store.h"

namespace orrery::cli {

void AddMetricsCommand(CLI::App& app, MetricsCommand* c) {
  c->metrics = app.add_subcommand("metrics", "the cluster's Prometheus metrics endpoints");
  c->metrics->require_subcommand(1);
  c->targets = c->metrics->add_subcommand(
      "targets", "print the endpoints as Prometheus file-based service discovery JSON");
  c->targets->add_option("--out", c->out, "write the JSON to this file (atomically) instead");
  c->targets->add_option("--address", c->flags.address,
                         "the head (host:port); default: this host's latest session");
  c->targets->add_option("--redis-address", c->flags.redis_address,
                         "the cluster's Redis (host:port)");
  c->targets->add_option("--redis-password-file", c->flags.redis_password_file,
                         "its password (default $ORRERY_REDIS_PASSWORD_FILE, else this host's "
                         "session of that Redis)");
}

int RunMetricsCommand(MetricsCommand& c) {
  InspectFlags& f = c.flags;
  FindCluster(f);
  if (f.redis_address.empty()) {
    std::cerr << "orrery metrics: no cluster's Redis known: pass --redis-address H:P (or "
                 "--address of a head started on this host)\n";
    return 2;
  }
  auto password = RedisPasswordFor(f.redis_password_file, f.redis_address);
  if (!password.ok()) {
    std::cerr << "orrery metrics: Redis password: " << password.status().message() << "\n";
    return 2;
  }
  auto store = RedisStateStore::Connect(f.redis_address, "default", password.value());
  if (!store.ok()) {
    std::cerr << "orrery metrics: " << store.status().message() << "\n";
    return 1;
  }
  auto head = store.value()->GetAll("head");
  auto nodes = head.ok() ? store.value()->GetAll("nodes") : head;
  if (!nodes.ok()) {
    std::cerr << "orrery metrics: " << nodes.status().message() << "\n";
    return 1;
  }
  std::string text = MetricsTargetsJson(head.value(), nodes.value());
  if (c.out.empty()) {
    std::cout << text;
    return 0;
  }
  if (!WriteAtomically(c.out, text)) {
    std::cerr << "orrery metrics: cannot write " << c.out << "\n";
    return 1;
  }
  return 0;
}

}  // namespace orrery::cli
