#include "core/internal/connect_probe.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <set>
#include <thread>

#include "core/internal/thread_annotations.h"
#include "core/src/local_channel.h"

namespace orrery {

namespace {

// A connect to `addr`, waiting at most timeout_ms for the kernel's answer.
ProbeOutcome ConnectTo(const sockaddr* addr, socklen_t len, int timeout_ms) {
  int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ProbeOutcome::kNoAnswer;
  ProbeOutcome outcome = ProbeOutcome::kNoAnswer;
  int rc = connect(fd, addr, len);
  if (rc == 0) {
    outcome = ProbeOutcome::kListening;
  } else if (errno == ECONNREFUSED || errno == ENOENT) {
    outcome = ProbeOutcome::kRefused;
  } else if (errno == EINPROGRESS || errno == EAGAIN) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, timeout_ms) == 1) {
      int err = 0;
      socklen_t n = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &n);
      if (err == 0) outcome = ProbeOutcome::kListening;
      if (err == ECONNREFUSED) outcome = ProbeOutcome::kRefused;
    }
  }
  close(fd);
  return outcome;
}

}  // namespace

// Probes an inbox address: tcp://host:port or ipc://path; anything else goes unanswered.
ProbeOutcome ProbeAddress(const std::string& address, int timeout_ms) {
  if (address.rfind("ipc://", 0) == 0) {
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    std::string path = address.substr(6);
    if (path.empty() || path.size() >= sizeof(un.sun_path)) return ProbeOutcome::kNoAnswer;
    std::memcpy(un.sun_path, path.data(), path.size());
    return ConnectTo(reinterpret_cast<const sockaddr*>(&un), sizeof(un), timeout_ms);
  }
  if (address.rfind("tcp://", 0) != 0) return ProbeOutcome::kNoAnswer;
  // A process of this host and user is asked over its Unix socket, as its peers reach it: a
  // bare connect to its TCP port, monitored for handshakes, would be logged there as a
  // connection refused for not authenticating. Resolve connects to that socket and checks
  // who listens; when nobody does, the TCP port gives the answer.
  if (!transport::local::Resolve(address).empty()) return ProbeOutcome::kListening;
  std::string hostport = address.substr(6);
  size_t colon = hostport.rfind(':');
  if (colon == std::string::npos || colon == 0) return ProbeOutcome::kNoAnswer;
  std::string host = hostport.substr(0, colon), port = hostport.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr)
    return ProbeOutcome::kNoAnswer;
  ProbeOutcome outcome = ConnectTo(found->ai_addr, found->ai_addrlen, timeout_ms);
  freeaddrinfo(found);
  return outcome;
}

namespace {

class ConnectProber final : public Prober {
 public:
  explicit ConnectProber(double timeout_s) : timeout_ms_(std::max(1, int(timeout_s * 1000))) {}
  ~ConnectProber() override {
    {
      MutexLock lock(&mu_);
      stop_ = true;
      cv_.NotifyAll();
    }
    if (thread_.joinable()) thread_.join();
  }

  void Probe(const std::string& key, const std::string& address) override {
    MutexLock lock(&mu_);
    if (!busy_.insert(key).second) return;
    queue_.emplace_back(key, address);
    cv_.NotifyAll();
    // Started on first use: most processes that could probe never need to.
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  }

  std::vector<std::pair<std::string, ProbeOutcome>> Take() override {
    MutexLock lock(&mu_);
    std::vector<std::pair<std::string, ProbeOutcome>> out;
    out.swap(done_);
    return out;
  }

 private:
  void Run() {
    std::pair<std::string, std::string> next;
    while (Next(&next)) {
      ProbeOutcome outcome = ProbeAddress(next.second, timeout_ms_);
      MutexLock lock(&mu_);
      busy_.erase(next.first);
      done_.emplace_back(std::move(next.first), outcome);
    }
  }

  // Waits for the next probe to send; false once the prober stops.
  bool Next(std::pair<std::string, std::string>* next) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    while (!stop_ && queue_.empty()) cv_.Wait(&mu_);
    if (stop_) return false;
    *next = std::move(queue_.front());
    queue_.pop_front();
    return true;
  }

  const int timeout_ms_;
  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::deque<std::pair<std::string, std::string>> queue_ GUARDED_BY(mu_);
  std::set<std::string> busy_ GUARDED_BY(mu_);
  std::vector<std::pair<std::string, ProbeOutcome>> done_ GUARDED_BY(mu_);
  std::thread thread_ GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<Prober> MakeConnectProber(double timeout_s) {
  return std::make_unique<ConnectProber>(timeout_s);
}

}  // namespace orrery
