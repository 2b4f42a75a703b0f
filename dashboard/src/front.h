// The dashboard's connection front (docs/dashboard.md "Slow clients"): one thread that
// accepts connections and reads each request whole, without blocking on any one client,
// before a handler thread sees it; then writes the reply and closes the connection.
//
// A client cannot hold the dashboard by sending slowly or not at all:
//  - a request's head must arrive whole within header_timeout of the connection's accept,
//    and its body within body_timeout of the head (bytes trickled in do not extend either);
//    past it the connection gets 408 and is closed;
//  - a client that takes none of its reply for write_timeout is closed on (a slow reader
//    holds a connection, never a thread);
//  - one client address holds at most max_connections_per_address connections, and all
//    clients at most max_connections; a connection beyond either gets 503 and is closed.
// Handler threads only ever see requests that arrived whole, so slow or idle connections
// occupy no thread: the front keeps answering everyone else.
//
// Threads: Start spawns the front's thread and `threads` handler threads; a streaming
// request (the `streams` predicate) gets a thread of its own for as long as it streams.
// Stop joins them all. The handler and predicate must be thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "orrery/status.h"

namespace orrery::dashboard {

struct FrontOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 picks a free port
  int threads = 4;
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{10000};
  std::chrono::milliseconds write_timeout{10000};
  int max_connections = 512;
  int max_connections_per_address = 32;
  size_t max_head_bytes = 16 * 1024;
  size_t max_body_bytes = 64 * 1024;
};

// One request, read whole, handed to a handler thread.
struct Exchange {
  std::string request;  // the head and the body, as received
  std::string remote_ip;
  int remote_port = 0;
  std::string local_ip;
  int local_port = 0;
  // The connection (non-blocking). Only a streaming request's handler writes to it
  // itself; the front neither reads nor writes it until the handler returns.
  int fd = -1;
  std::chrono::milliseconds write_timeout{0};
};

class Front {
 public:
  // Returns the reply's bytes, which the front writes before it closes the connection (a
  // streaming handler may have written to Exchange::fd first and return what is left).
  using Handler = std::function<std::string(const Exchange&)>;
  // Whether a request, given its head, streams (holds a thread of its own while it does).
  using Streams = std::function<bool(std::string_view head)>;

  Front(FrontOptions options, Handler handler, Streams streams);
  ~Front();  // stops
  Front(const Front&) = delete;
  Front& operator=(const Front&) = delete;

  // Binds, listens and starts the threads; returns the bound port. Unavailable when the
  // address cannot be bound. Call once.
  Result<int> Start();
  // Stops accepting, drops queued requests, waits for running handlers (a handler must end
  // on its own: streaming ones watch their server stopping) and closes every connection.
  // Idempotent.
  void Stop();

 private:
  struct Conn;
  struct Done {
    uint64_t id;
    std::string reply;
  };

  void Loop();
  void AcceptAll();
  void Refuse(int fd, const char* status_line, const char* why);
  void Read(uint64_t id, Conn& c);
  bool RequestComplete(Conn& c);
  void Dispatch(uint64_t id, Conn& c);
  void Write(uint64_t id, Conn& c);
  void Reply(Conn& c, std::string bytes);
  void Expire();
  void TakeDone();
  void Close(uint64_t id);
  int PollTimeoutMs() const;
  void Complete(uint64_t id, std::string reply);  // any thread
  void HandlerThread();

  FrontOptions options_;
  Handler handler_;
  Streams streams_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Complete and Stop wake the loop
  std::atomic<bool> stopping_{false};
  std::thread loop_;

  // Owned by the front's thread.
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::map<std::string, int> per_address_;
  uint64_t next_id_ = 1;
  std::chrono::steady_clock::time_point accept_paused_until_;

  std::mutex mu_;  // guards what follows
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<Done> done_;
  int running_streams_ = 0;
  std::vector<std::thread> handlers_;
};

}  // namespace orrery::dashboard
