// The HTTP endpoint of a daemon's metrics (docs/metrics.md): GET /metrics answers the last
// snapshot the daemon handed over (Prometheus text format 0.0.4); anything else is 404.
// The server's threads touch only the snapshot, under its mutex: the daemon builds the text
// on its own thread and calls SetSnapshot. Requests are bounded in size and time.
#pragma once

#include <memory>
#include <string>

#include "orrery/status.h"

namespace orrery::metrics {

class MetricsServer {
 public:
  MetricsServer();
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds host:port (0: any free port) and serves on a thread of its own; returns the port.
  // Unavailable when it cannot bind. `advertise_host` names it in address(); "" means the
  // host, or 127.0.0.1 for a wildcard host (0.0.0.0), as the daemons' inboxes do.
  Result<int> Start(const std::string& host, int port, const std::string& advertise_host = "");
  void Stop();
  // "host:port" as Prometheus reaches it; "" before Start.
  std::string address() const;
  // Thread-safe: what GET /metrics answers from now on.
  void SetSnapshot(std::string text);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The --metrics-port convention: -1 turns metrics off, 0 is any free port. Starts `server`
// unless off; on success returns its address ("" when off).
Result<std::string> StartIfEnabled(MetricsServer& server, const std::string& host, int port,
                                   const std::string& advertise_host = "");

}  // namespace orrery::metrics
