#include "core/internal/metrics_server.h"

#include <httplib.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/internal/thread_annotations.h"

namespace orrery::metrics {

namespace {
constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";
}  // namespace

struct MetricsServer::Impl {
  std::unique_ptr<httplib::Server> http;
  std::thread listener;
  std::string address;
  Mutex mu;
  std::string snapshot GUARDED_BY(mu);
};

MetricsServer::MetricsServer() : impl_(std::make_unique<Impl>()) {}
MetricsServer::~MetricsServer() { Stop(); }

std::string MetricsServer::address() const { return impl_->address; }

void MetricsServer::SetSnapshot(std::string text) {
  MutexLock lock(&impl_->mu);
  impl_->snapshot = std::move(text);
}

Result<int> MetricsServer::Start(const std::string& host, int port,
                                 const std::string& advertise_host) {
  if (impl_->http) return Status::InvalidArgument("the metrics server was already started");
  auto http = std::make_unique<httplib::Server>();
  http->new_task_queue = [] { return new httplib::ThreadPool(2); };
  http->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http->set_payload_max_length(4096);
  http->set_read_timeout(5);
  http->set_write_timeout(5);
  http->set_keep_alive_timeout(5);
  http->set_keep_alive_max_count(100);
  Impl* impl = impl_.get();
  http->Get("/metrics", [impl](const httplib::Request&, httplib::Response& res) {
    std::string body;
    {
      MutexLock lock(&impl->mu);
      body = impl->snapshot;
    }
    res.set_content(std::move(body), kContentType);
  });
  http->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.status == 404) res.set_content("not found: only GET /metrics\n", "text/plain");
  });
  http->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content("internal error\n", "text/plain");
      });
  errno = 0;
  int bound =
      port == 0 ? http->bind_to_any_port(host) : (http->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    std::string why = errno ? std::strerror(errno) : "cannot bind";
    return Status::Unavailable("metrics cannot listen on " + host + ":" + std::to_string(port) +
                               ": " + why);
  }
  impl_->http = std::move(http);
  impl_->listener = std::thread([h = impl_->http.get()] { h->listen_after_bind(); });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!impl_->http->is_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // start-up, with a deadline
  }
  if (!impl_->http->is_running()) {
    Stop();
    return Status::Internal("the metrics HTTP server did not start");
  }
  // As the daemons' inboxes advertise themselves: a wildcard bind is named by loopback.
  std::string adv = advertise_host.empty() ? (host == "0.0.0.0" || host == "*" ? "127.0.0.1" : host)
                                           : advertise_host;
  impl_->address = adv + ":" + std::to_string(bound);
  return bound;
}

void MetricsServer::Stop() {
  if (impl_->http) impl_->http->stop();
  if (impl_->listener.joinable()) impl_->listener.join();
  impl_->http.reset();
}

Result<std::string> StartIfEnabled(MetricsServer& server, const std::string& host, int port,
                                   const std::string& advertise_host) {
  if (port < 0) return std::string();
  auto bound = server.Start(host, port, advertise_host);
  if (!bound.ok()) return bound.status();
  return server.address();
}

}  // namespace orrery::metrics
