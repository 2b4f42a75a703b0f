// libFuzzer target: the bytes of one HTTP request as a browser (or anyone who can reach the
// port) sends them to the dashboard: cpp-httplib parses the request line, headers, query and
// body, and the dashboard's handlers (dashboard/src/server.h InstallHandlers) check the
// credentials (dashboard/internal/auth.h: cookie, bearer header, login form, one-time ticket) of
// a dashboard that requires a token, then route the path (HandleRequest) with no Redis
// configured. Whatever the bytes, the server must answer or drop the connection, never crash.
//
// Debian's cpp-httplib is a compiled library without coverage instrumentation, so coverage
// guides the fuzzer through the dashboard's routing; the parser still runs under ASan's
// allocator checks.
#include <httplib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "dashboard/src/server.h"

namespace {

// A connection whose reads return the fuzzer's bytes and whose writes are kept.
class FuzzedStream : public httplib::Stream {
 public:
  FuzzedStream(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    size_t n = std::min(size, size_ - pos_);
    std::memcpy(ptr, data_ + pos_, n);
    pos_ += n;
    return ssize_t(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    response_.append(ptr, size);
    return ssize_t(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 8265;
  }
  socket_t socket() const override { return 0; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string response_;
};

// The dashboard's server configuration (dashboard/src/server.cc Server::Start) on a server
// whose request processing the fuzzer can call without a socket.
// The token is the one the seeds (fuzz/make_corpus.cc) send, so inputs reach both the
// accepted and the refused paths.
constexpr const char* kToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

class FuzzableServer : public httplib::Server {
 public:
  FuzzableServer() : auth_(kToken) {
    set_payload_max_length(64 * 1024);
    orrery::dashboard::InstallHandlers(*this, nullptr, "", &auth_);
  }
  void Process(FuzzedStream& stream) {
    bool connection_closed = false;
    process_request(stream, /*close_connection=*/true, connection_closed, nullptr);
  }

 private:
  orrery::dashboard::Auth auth_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static FuzzableServer* server = new FuzzableServer();  // one per process, never destroyed
  FuzzedStream stream(data, size);
  server->Process(stream);
  return 0;
}
