// `orrery status` and `orrery list`: what the cluster looks like, from the head (nodes) and
// from the state store in Redis (actors, placement groups, jobs).
#pragma once

#include <string>

#include "cli/src/daemons.h"

namespace CLI {
class App;
}  // namespace CLI

namespace orrery::cli {

struct InspectFlags {
  std::string address;              // head host:port
  std::string redis_address;        // host:port
  std::string redis_password_file;  // as given (--redis-password-file)
  std::string redis_password;       // what the CLI found (RedisPasswordFor); "" for none
  bool json = false;
  // `orrery list workers` filters.
  std::string state, node, job;
};

int PrintStatus(const InspectFlags& flags);
int List(const std::string& what, const InspectFlags& flags);

// The `orrery status` and `orrery list` subcommands and the flags they fill (inspect_cmd.cc).
struct InspectCommands {
  CLI::App* status = nullptr;
  CLI::App* list = nullptr;
  std::string what;  // list's argument
  InspectFlags flags;
  CredentialFlags credentials;
};
// Fills in the head's and Redis's addresses the user did not give: $ORRERY_ADDRESS, else
// this host's latest session; Redis from the session of that head.
void FindCluster(InspectFlags& inspect);
void AddInspectCommands(CLI::App& app, InspectCommands* commands);
// Finds the cluster (the flags, else $ORRERY_ADDRESS, else this host's sessions), its Redis
// password and credentials, and runs the subcommand parsed. Returns the exit code.
int RunInspectCommand(InspectCommands& commands);

// What the commands that talk to a cluster share (inspect_cmd.cc): fills in the head's and
// Redis's addresses the flags left out ($ORRERY_ADDRESS, this host's sessions) and Redis's
// password; sets this process's credentials and checks that the head accepts them (false
// after saying why).
orrery::Status FindClusterAndPassword(InspectFlags& flags);
bool Authenticate(const CredentialFlags& credentials, const std::string& address);

}  // namespace orrery::cli
