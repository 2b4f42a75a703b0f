// The web dashboard (docs/dashboard.md): an HTTP server that shows a
// cluster from its Redis alone (nodes, actors, placement groups, jobs, training runs), so
// it works while the head is down. It only reads Redis.
//
//   orrery::dashboard::Dashboard d({.redis_address = "127.0.0.1:6379", .port = 0});
//   orrery::Result<int> port = d.Start();  // serving on a background thread pool
//   ...
//   d.Stop();
#pragma once

#include <memory>
#include <string>

#include "orrery/status.h"

namespace orrery::dashboard {

class Server;

struct DashboardOptions {
  std::string redis_address;  // host:port; "" serves pages that say Redis is missing
  std::string cluster = "default";
  std::string host = "127.0.0.1";  // address to bind
  int port = 8265;                 // 0 picks a free port
  int threads = 4;                 // request handler threads
  int redis_timeout_ms = 1000;     // connect and command timeout per Redis call
  std::string redis_password;      // AUTH on every Redis connection; "" for a Redis without one
  // Authentication (docs/dashboard.md): bound to a loopback host the dashboard is open;
  // bound to any other, every page and /api route needs the cluster token `token` (a
  // login cookie, or a bearer header). Start refuses a non-loopback host with no token
  // unless `insecure` (which serves it open to anyone who reaches it).
  std::string token;
  bool insecure = false;
  // Slow clients (docs/dashboard.md "Slow clients"): a request's head must arrive whole
  // within header_timeout_ms of the connection, its body within body_timeout_ms of the
  // head, and a client take some of its reply every write_timeout_ms, else the connection
  // is closed; a client address holds at most max_connections_per_address connections, all
  // clients at most max_connections (more are answered 503 and closed).
  int header_timeout_ms = 10000;
  int body_timeout_ms = 10000;
  int write_timeout_ms = 10000;
  int max_connections_per_address = 32;
  int max_connections = 512;
};

class Dashboard {
 public:
  explicit Dashboard(DashboardOptions options);
  ~Dashboard();  // stops
  Dashboard(const Dashboard&) = delete;
  Dashboard& operator=(const Dashboard&) = delete;

  // Binds and starts serving; returns the bound port. The process should ignore SIGPIPE
  // (`orrery dashboard` does): Redis or a browser hanging up mid-write raises it. Unavailable when
  // the address cannot be bound (e.g. the port is in use). Call once.
  Result<int> Start();
  // Stops serving and joins the server's threads. Idempotent.
  void Stop();
  // "http://host:port" once started (this host's name when bound to every interface).
  std::string url() const;
  // A URL that logs a browser in once (url()/login?ticket=..., a new one-time ticket each
  // call), or url() when the dashboard is open.
  std::string login_url();

 private:
  std::unique_ptr<Server> server_;
};

}  // namespace orrery::dashboard
