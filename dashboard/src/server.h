// The dashboard's HTTP side: routing of requests to the JSON API (api.h) and the
// embedded pages (assets.h), and the server that runs it: the front (front.h) reads
// requests whole, cpp-httplib parses them and writes the replies (processor.h).
#pragma once

#include <memory>
#include <string>

#include "dashboard/internal/auth.h"
#include "dashboard/src/events.h"
#include "dashboard/src/front.h"
#include "dashboard/src/http_reply.h"
#include "dashboard/src/processor.h"
#include "dashboard/src/redis_reader.h"
#include "orrery/dashboard.h"
#include "orrery/status.h"

namespace httplib {
class Server;
}

namespace orrery::dashboard {

// Answers one request (docs/dashboard.md): GET of an /api path reads Redis through
// `reader` (null: no Redis configured, reported as redis.ok=false); page paths answer the
// embedded index.html; /static/app.js and /static/app.css the embedded assets; anything
// else 404; methods other than GET and HEAD 405. Never throws.
HttpReply HandleRequest(const std::string& method, const std::string& path, RedisReader* reader,
                        const std::string& redis_address);

// Installs the dashboard's request handling on `http`: every request goes through `auth`
// (auth.h) and then HandleRequest, but for GET /api/events, which streams `feed`'s events
// (events.h; 503 without a feed or beyond its streams). POST /login is routed after httplib
// has read its body (bounded by the payload limit); everything else is answered before any
// body is read. The pointers must outlive `http`'s serving. Used by Server and by the
// request fuzzer.
void InstallHandlers(httplib::Server& http, RedisReader* reader, const std::string& redis_address,
                     Auth* auth, ChangeFeed* feed = nullptr);

// The HTTP server. Start binds and serves: the front's thread reads requests (bounded
// per client address and in time, docs/dashboard.md "Slow clients"), a pool of
// `threads` handler threads answers them, each event stream has a thread of its own; Stop
// (or the destructor) stops it. Thread-safe for one Start and any Stops.
class Server {
 public:
  explicit Server(DashboardOptions options);
  ~Server();

  Result<int> Start();
  void Stop();
  const DashboardOptions& options() const { return options_; }
  int port() const { return port_; }
  // A one-time login ticket (auth.h); "" when the dashboard is open.
  std::string NewTicket() { return auth_ ? auth_->NewTicket() : ""; }

 private:
  DashboardOptions options_;
  std::unique_ptr<RedisReader> reader_;   // null when no Redis address was given
  std::unique_ptr<Auth> auth_;            // made by Start
  std::unique_ptr<ChangeFeed> feed_;      // made by Start
  std::unique_ptr<Processor> processor_;  // made by Start
  std::unique_ptr<Front> front_;          // made by Start
  int port_ = 0;
};

}  // namespace orrery::dashboard
