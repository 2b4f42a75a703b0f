// The head: a thin service that receives every message on its inbox thread, decodes it and
// hands it to the manager that owns that state (nodes, actors, leases, placement groups,
// jobs, driver records), and runs the periodic tick (health checks, timeouts, scheduling).
// Everything runs on the inbox thread; handlers never block. Every state change is written
// to the StateStore, from which a restarted head rebuilds itself (head_recovery.cc).
// docs/architecture.md "The head".
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/internal/metrics_server.h"
#include "core/internal/protocol.h"
#include "core/internal/state_store.h"
#include "core/internal/transport.h"
#include "scheduler/src/failure_detector.h"
#include "scheduler/src/head_context.h"
#include "scheduler/src/head_managers.h"
#include "scheduler/src/retention.h"

namespace orrery::scheduler {

struct HeadOptions {
  std::string bind_host = "127.0.0.1";
  int port = 0;
  std::string advertise_host;
  std::shared_ptr<StateStore> store;
  long long max_message_bytes = 512ll << 20;
  // Failure detection (docs/architecture.md "Failure detection"): nodes and drivers
  // heartbeat every period; one silent for 3 periods is suspected and probed, dead at once
  // when the probe finds its process gone, else after period x threshold of silence (30 s
  // by default, as Ray's health checks tolerate: a busy or paused host is not a dead one).
  double health_check_period_s = 1.0;
  int health_check_failure_threshold = 30;
  // Where drivers' executables are kept for nodes that lack them; empty: $ORRERY_TMPDIR
  // (or /tmp/orrery) + "/head_binaries".
  std::string binary_dir;
  // Records of ended nodes, actors, jobs, runs and submissions are deleted this long after
  // they ended (docs/redis-schema.md "Retention"); 0 keeps them for ever.
  double history_ttl_s = 0;
  // The metrics endpoint (docs/metrics.md) on bind_host: -1 none, 0 any free port.
  int metrics_port = -1;
};

class HeadService {
 public:
  explicit HeadService(HeadOptions options);
  ~HeadService();
  Status Start();
  void Stop();
  const std::string& address() const { return inbox_.address(); }
  // "host:port" of GET /metrics; "" when metrics are off.
  const std::string& metrics_address() const { return metrics_address_; }

 private:
  // Registers the handler of one message type: decodes it (a message that does not decode
  // is answered with kError by the inbox) and passes it on.
  template <typename Msg>
  void On(proto::MsgType type, std::function<void(const Msg&, transport::Envelope&)> handle);
  void RegisterHandlers();
  Status Handle(transport::Envelope& env);
  // Rebuilds every manager from the state store (head_recovery.cc); fails when the store
  // cannot be read.
  Status Recover();
  void OnRegisterNode(const proto::RegisterNodeMsg& m);
  void OnWorkerEvent(proto::WorkerEventMsg m);
  // What a node's worker event changes, on the node (index) it came from.
  void HandleWorkerEvent(proto::WorkerEventMsg& m, int node);
  void Tick();
  // Feeds the failure detector what it heard and acts on its verdicts (head_health.cc).
  void HeardNode(int i);
  void HeardJob(const proto::JobMsg& m);
  void HeardRestored();
  void CheckHealth(double now);
  void OnNodeVerdict(const FailureDetector::Verdict& v, double now);
  // Starts the metrics endpoint (when asked for) and records its address in table "head".
  Status StartMetrics();

  HeadOptions options_;
  std::shared_ptr<RetentionStore> retention_;  // null without a history TTL
  transport::Inbox inbox_;
  HeadManagers m_;
  FailureDetector nodes_health_;
  // Drivers heartbeat once a second whatever the nodes' period: their detector counts in
  // their period, with a tolerance of at least 5 s (head_health.cc).
  FailureDetector drivers_health_;
  std::unordered_map<int, std::function<Status(transport::Envelope&)>> handlers_;
  // Serves the text the inbox thread renders each second; its threads see nothing else.
  std::unique_ptr<metrics::MetricsServer> metrics_;
  std::string metrics_address_;
  double metrics_rendered_ = 0;
};

}  // namespace orrery::scheduler
