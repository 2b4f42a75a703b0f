// The autoscaler's loop (docs/autoscaler.md): every interval it syncs with the head
// (core/internal/protocol_autoscaler.h), asks the providers for the nodes the waiting demands
// need, removes the nodes idle past their timeout, and reports every decision and its
// reason (log, the head's events channel, the "autoscaler" table read by `orrery status`
// and the dashboard). A provider that fails is retried with backoff: a failed create per
// group, a failed removal per unit (its name stays taken until the removal succeeds).
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autoscaler/src/config.h"
#include "autoscaler/src/planner.h"
#include "autoscaler/src/provider.h"

namespace orrery::autoscaler {

struct Options {
  std::string head;  // host:port
  Config config;
  std::string orrery_path;                 // for the local provider
  std::map<std::string, std::string> env;  // for the nodes and commands
  std::vector<std::string> node_args;      // for local nodes
  std::string answer_host = "127.0.0.1";   // where the head's answers come back
  // Makes each group's provider; MakeProvider when empty (tests pass a fake).
  std::function<std::unique_ptr<Provider>(const GroupConfig&)> make_provider;
};

class Autoscaler {
 public:
  explicit Autoscaler(Options options);
  ~Autoscaler();
  // One round at `now` (monotonic seconds). An error when the head did not answer.
  Status Tick(double now);
  // The adding half of a round, given what the head said (Tick calls it after its sync;
  // unit tests call it directly): launches that joined or timed out, then new nodes.
  void Grow(const proto::AutoscalerStateMsg& state, double now);
  // The latest decisions, oldest first (what the log and the head's events channel got).
  const std::deque<nlohmann::json>& Events() const { return events_; }
  // Stops what the local providers started.
  void Shutdown();

 private:
  struct Pending {
    Launching launch;
    Unit unit;
    double started = 0;
  };
  struct Backoff {
    double next_try = 0, delay = 0;
    std::string error;
  };
  // A unit the provider failed to remove: its machine may still run under its name, so it
  // stays recorded, its removal is retried with backoff until it succeeds, and no new unit
  // gets its ordinal meanwhile (the names would clash).
  struct Unremoved {
    Unit unit;
    double next_try = 0, delay = 0;
  };

  Result<proto::AutoscalerStateMsg> Sync(std::vector<ScaleDown> remove);
  void ScaleUpGroup(const ScaleUp& up, const std::vector<proto::AutoscalerNodeMsg>& nodes,
                    double now);
  void Removed(const ScaleDown& down, const std::vector<proto::AutoscalerNodeMsg>& nodes,
               double now);
  // Removes `unit` through its group's provider; a failure is reported and kept in
  // unremoved_ for RetryRemovals.
  Status Remove(const Unit& unit, double now);
  void RemovalFailed(Unremoved r, const Status& status, double now);
  void RetryRemovals(double now);
  void TrackLaunches(const std::vector<proto::AutoscalerNodeMsg>& nodes, double now);
  void Failed(const std::string& group, const std::string& error, double now);
  void Event(const std::string& group, const std::string& action, int count,
             const std::string& reason);
  const GroupConfig* Group(const std::string& name) const;
  int Units(const std::string& group, const std::vector<proto::AutoscalerNodeMsg>& nodes) const;
  std::string StatusJson(const std::vector<proto::AutoscalerNodeMsg>& nodes) const;

  Options o_;
  std::map<std::string, std::unique_ptr<Provider>> providers_;  // by group
  std::vector<Pending> launching_;
  std::vector<Unremoved> unremoved_;
  std::map<std::string, Backoff> backoff_;
  std::deque<nlohmann::json> events_;  // the latest decisions
  nlohmann::json new_events_ = nlohmann::json::array();
  std::vector<std::string> unsatisfiable_;
  std::vector<proto::AutoscalerNodeMsg> last_nodes_;
};

}  // namespace orrery::autoscaler
