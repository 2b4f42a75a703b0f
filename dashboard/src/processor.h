// Runs the dashboard's request handling (server.h InstallHandlers) on the requests the
// front (front.h) read whole: cpp-httplib parses each request from memory and writes its
// reply, into memory (returned to the front, which writes it to the client) or, for a
// streaming request, straight to the connection.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "dashboard/internal/auth.h"
#include "dashboard/src/events.h"
#include "dashboard/src/front.h"
#include "dashboard/src/redis_reader.h"

namespace orrery::dashboard {

class Processor {
 public:
  // The pointers must outlive the Processor. Starts serving (see SetServing).
  Processor(RedisReader* reader, const std::string& redis_address, Auth* auth, ChangeFeed* feed,
            size_t max_body_bytes);
  ~Processor();

  // The reply to `exchange`'s request (Front::Handler). Thread-safe. Streaming replies
  // (Streams) are written to exchange.fd as they go, each write bounded by
  // exchange.write_timeout; what is returned is then empty.
  std::string Handle(const Exchange& exchange);
  // Whether a request, given its request line, streams: GET /api/events.
  static bool Streams(std::string_view request_line);
  // While not serving, streams end at their next turn (Stop calls this before it waits).
  void SetServing(bool serving);

 private:
  class Http;
  std::unique_ptr<Http> http_;
};

}  // namespace orrery::dashboard
