#include "dashboard/src/processor.h"

#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

#include "dashboard/src/server.h"

namespace orrery::dashboard {

namespace {

using Clock = std::chrono::steady_clock;

// Waits until `fd` can take bytes, at most `timeout`; false when it cannot (the client
// stopped reading, went away, or the time ran out).
bool WaitWritable(int fd, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{fd, POLLOUT, 0};
    int rc = poll(&p, 1, int(std::max<int64_t>(left.count(), 0)));
    if (rc < 0 && errno == EINTR) continue;
    return rc > 0 && (p.revents & POLLOUT) && !(p.revents & (POLLERR | POLLHUP));
  }
}

// One exchange as httplib sees a connection: reads come from the request read whole,
// writes go to memory, or to the connection for a streaming reply.
class ExchangeStream : public httplib::Stream {
 public:
  ExchangeStream(const Exchange& ex, bool direct) : ex_(ex), direct_(direct) {}

  bool is_readable() const override { return pos_ < ex_.request.size(); }
  bool is_writable() const override { return !direct_ || WaitWritable(ex_.fd, ex_.write_timeout); }
  ssize_t read(char* ptr, size_t size) override {
    size_t n = std::min(size, ex_.request.size() - pos_);
    std::memcpy(ptr, ex_.request.data() + pos_, n);
    pos_ += n;
    return ssize_t(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!direct_) {
      out_.append(ptr, size);
      return ssize_t(size);
    }
    size_t sent = 0;
    while (sent < size) {
      if (!WaitWritable(ex_.fd, ex_.write_timeout)) return -1;
      ssize_t n = send(ex_.fd, ptr + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n <= 0) return -1;
      sent += size_t(n);
    }
    return ssize_t(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = ex_.remote_ip;
    port = ex_.remote_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = ex_.local_ip;
    port = ex_.local_port;
  }
  socket_t socket() const override { return ex_.fd; }
  std::string TakeOutput() { return std::move(out_); }

 private:
  const Exchange& ex_;
  bool direct_;
  size_t pos_ = 0;
  std::string out_;
};

}  // namespace

// httplib's request processing without its sockets. httplib ends a streaming reply once
// its listening socket is gone; this server has none, so svr_sock_ holds a marker (never a
// descriptor: nothing here listens, stops or closes it) while serving.
class Processor::Http : public httplib::Server {
 public:
  static constexpr socket_t kServing = INT_MAX;

  std::string Process(const Exchange& ex) {
    size_t line = ex.request.find('\n');
    ExchangeStream strm(ex, Streams(std::string_view(ex.request).substr(0, line)));
    bool connection_closed = false;
    process_request(strm, /*close_connection=*/true, connection_closed, nullptr);
    return strm.TakeOutput();
  }
  void SetServing(bool serving) { svr_sock_ = serving ? kServing : INVALID_SOCKET; }
};

Processor::Processor(RedisReader* reader, const std::string& redis_address, Auth* auth,
                     ChangeFeed* feed, size_t max_body_bytes)
    : http_(std::make_unique<Http>()) {
  http_->set_payload_max_length(max_body_bytes);
  InstallHandlers(*http_, reader, redis_address, auth, feed);
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content(R"({"error": "internal error"})", "application/json; charset=utf-8");
      });
  http_->SetServing(true);
}

Processor::~Processor() { http_->SetServing(false); }

std::string Processor::Handle(const Exchange& exchange) { return http_->Process(exchange); }

bool Processor::Streams(std::string_view line) {
  constexpr std::string_view kEvents = "GET /api/events";
  return line.substr(0, kEvents.size()) == kEvents && line.size() > kEvents.size() &&
         (line[kEvents.size()] == ' ' || line[kEvents.size()] == '?');
}

void Processor::SetServing(bool serving) { http_->SetServing(serving); }

}  // namespace orrery::dashboard
