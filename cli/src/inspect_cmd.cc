// `orrery status` and `orrery list` as commands: their flags, and how they find the cluster.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "cli/src/inspect.h"
#include "cli/src/session.h"
#include "core/internal/security.h"

namespace orrery::cli {

void FindCluster(InspectFlags& inspect) {
  auto latest = LatestSession();
  const char* env = std::getenv("ORRERY_ADDRESS");
  if (inspect.address.empty() && env && *env) inspect.address = env;
  if (inspect.address.empty() && latest.ok()) inspect.address = latest->values["head_address"];
  if (inspect.redis_address.empty() && latest.ok() &&
      latest->values["head_address"] == inspect.address) {
    inspect.redis_address = latest->values["redis_address"];
  }
  if (inspect.redis_address.empty()) {
    // A node-only session does not know Redis: take it from this host's head session.
    for (auto& s : StartedSessions()) {
      if (s.values["head_address"] == inspect.address && !s.values["redis_address"].empty()) {
        inspect.redis_address = s.values["redis_address"];
      }
    }
  }
}

// Sets this process's credentials and checks that the head accepts them; false (after
// saying why) when they are missing or refused.
bool Authenticate(const CredentialFlags& credentials, const std::string& address) {
  auto used = UseDaemonCredentials(credentials, address);
  if (!used.ok()) {
    std::cerr << "orrery: " << used.status().message() << "\n";
    return false;
  }
  if (address.empty()) return true;
  std::string head = address.find("://") == std::string::npos ? "tcp://" + address : address;
  if (orrery::Status p = security::ProbeHandshake(head, 2000);
      p.code() == StatusCode::kPermissionDenied) {
    std::cerr << "orrery: " << security::AuthFailedMessage(head, security::ProcessCredentials())
              << "\n";
    return false;
  }
  return true;
}

orrery::Status FindClusterAndPassword(InspectFlags& inspect) {
  FindCluster(inspect);
  if (inspect.redis_address.empty()) return Status::Ok();
  auto password = RedisPasswordFor(inspect.redis_password_file, inspect.redis_address);
  if (!password.ok())
    return Status::InvalidArgument("Redis password: " + password.status().message());
  inspect.redis_password = password.value();
  return Status::Ok();
}

void AddInspectCommands(CLI::App& app, InspectCommands* c) {
  c->status =
      app.add_subcommand("status", "nodes with used/total resources, actors, placement groups");
  c->list = app.add_subcommand(
      "list", "list nodes|actors|placement-groups|jobs|runs|objects|workers|tasks");
  c->list
      ->add_option("what", c->what,
                   "nodes, actors, placement-groups, jobs, runs, objects (what each alive "
                   "node's object store holds), workers (each alive node's processes) or tasks "
                   "(what each running job's driver submitted), the last three asked of the "
                   "nodes and drivers")
      ->required();
  c->list->add_option("--state", c->flags.state, "workers, tasks: only those in this state");
  c->list->add_option("--node", c->flags.node, "workers: only this node's (an id or its start)");
  c->list->add_option("--job", c->flags.job,
                      "workers, tasks: only this job's (an id or its start)");
  for (auto* sub : {c->status, c->list}) {
    sub->add_option("--address", c->flags.address,
                    "the head (host:port); default: this host's latest session");
    sub->add_option("--redis-address", c->flags.redis_address, "the cluster's Redis (host:port)");
    sub->add_option("--redis-password-file", c->flags.redis_password_file,
                    "its password (default $ORRERY_REDIS_PASSWORD_FILE, else this host's session "
                    "of that Redis)");
    sub->add_flag("--json", c->flags.json, "print JSON");
  }
  for (auto* sub : {c->status, c->list}) AddCredentialFlags(sub, &c->credentials);
}

int RunInspectCommand(InspectCommands& c) {
  InspectFlags& inspect = c.flags;
  if (orrery::Status s = FindClusterAndPassword(inspect); !s.ok()) {
    std::cerr << "orrery: " << s.message() << "\n";
    return 2;
  }
  if (!Authenticate(c.credentials, inspect.address)) return 2;
  return *c.status ? PrintStatus(inspect) : List(c.what, inspect);
}

}  // namespace orrery::cli
