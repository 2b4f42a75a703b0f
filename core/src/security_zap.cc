// The ZAP handler and the handshake monitors of server sockets (docs/security.md): which
// peers a CURVE server admits, and a log line for every peer whose handshake failed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sodium.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "core/internal/log.h"
#include "core/internal/rate_limit.h"
#include "core/internal/security.h"
#include "core/internal/thread_annotations.h"
#include "core/src/local_channel.h"
#include "core/src/security_internal.h"

namespace orrery::security {

namespace internal {

// Reads one monitor event: (event, value, endpoint). False when none is waiting.
bool ReadMonitorEvent(zmq::socket_t& pair, uint16_t* event, uint32_t* value) {
  zmq::message_t head;
  if (!pair.recv(head, zmq::recv_flags::dontwait)) return false;
  zmq::message_t endpoint;
  while (head.more() || endpoint.more()) {
    if (!pair.recv(endpoint, zmq::recv_flags::dontwait)) break;
    if (!endpoint.more()) break;
  }
  if (head.size() < 6) return false;
  std::memcpy(event, head.data(), 2);
  std::memcpy(value, static_cast<const char*>(head.data()) + 2, 4);
  return true;
}

}  // namespace internal

namespace {

using internal::ReadMonitorEvent;

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";

// Refusals whose peer address is known and those whose is not (a peer that closes at once
// can be gone before its address is read) are limited apart, so the first kind is never
// hidden behind the second.
RateLimitedLog g_refused_log(5.0);
RateLimitedLog g_refused_unknown_log(5.0);

void LogRefused(const std::string& peer, const std::string& where, const std::string& why) {
  uint64_t suppressed = 0;
  if (!(peer.empty() ? g_refused_unknown_log : g_refused_log).ShouldLog(&suppressed)) return;
  LOG_WARN("refused a connection from " +
           (peer.empty() ? std::string("an unknown address") : peer) + " to " + where + ": " + why +
           " (nothing it sent was read)" + RateLimitedLog::More(suppressed));
}

std::string PeerOf(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  char host[INET6_ADDRSTRLEN] = {0};
  int port = 0;
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  } else {
    return "";
  }
  return std::string(host) + ":" + std::to_string(port);
}

struct Monitor {
  uint64_t id = 0;
  std::string name;
  std::unique_ptr<zmq::socket_t> pair;
  std::map<int, std::string> peers;  // fd -> peer address, for connections not yet closed
  std::string failure;               // why the last handshake failed, until its disconnect
};

const char* FailureReason(uint16_t event, uint32_t value) {
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
    if (value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
      return "its handshake did not decrypt: it does not hold this cluster's token";
    if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
      return "it does not use CURVE security (no token, or started with --insecure)";
    return "its handshake broke the protocol";
  }
  return "it closed the connection before authenticating (no token, a wrong token, not an Orrery "
         "peer, or a "
         "peer that went away during the handshake)";
}

}  // namespace

struct ZapHandler::State {
  zmq::context_t* context = nullptr;
  std::atomic<bool> stop{false};
  Mutex mu;
  std::vector<std::unique_ptr<Monitor>> added GUARDED_BY(mu);  // handed over to the thread
  std::vector<uint64_t> removed GUARDED_BY(mu);
  // Wakes the handler's thread (which otherwise sleeps until a ZAP request or a handshake
  // event: an idle process pays nothing for it): PUSH to the thread's PULL, under mu.
  std::unique_ptr<zmq::socket_t> wake GUARDED_BY(mu);

  void Wake() REQUIRES(mu) {
    if (!wake) return;
    try {
      wake->send(zmq::const_buffer(nullptr, 0), zmq::send_flags::dontwait);  // full: it is awake
    } catch (const zmq::error_t&) {
    }
  }
};

namespace {

Mutex g_zap_mu;
std::map<zmq::context_t*, std::shared_ptr<ZapHandler::State>> g_zap_states GUARDED_BY(g_zap_mu);

// Why a connection to a same-host channel's socket (kLocalZapDomain) is refused; "" when it
// is admitted: PLAIN with this cluster's LocalSecret, from a process of this user.
std::string LocalRefusal(const std::vector<zmq::message_t>& frames, const Credentials& creds) {
  if (frames.size() < 8 || frames[5].to_string_view() != "PLAIN") {
    return "it does not use the same-host channel's PLAIN mechanism (no token, or started "
           "with --insecure)";
  }
  if (!transport::local::PeerIsUser(frames[3].to_string(), geteuid())) {
    return "it runs as another user";
  }
  std::string secret = LocalSecret(creds);
  if (frames[6].to_string_view() != internal::kLocalUser || frames[7].size() != secret.size() ||
      sodium_memcmp(frames[7].data(), secret.data(), secret.size()) != 0) {
    return "its password is not this cluster's: it holds a different token";
  }
  return "";
}

// Answers one waiting ZAP request; false when none was waiting.
bool AnswerZap(zmq::socket_t& rep, const Credentials& creds) {
  std::vector<zmq::message_t> frames;
  if (!zmq::recv_multipart(rep, std::back_inserter(frames), zmq::recv_flags::dontwait))
    return false;
  auto text = [&](size_t i) { return i < frames.size() ? frames[i].to_string() : std::string(); };
  std::string request_id = text(1);
  std::string address = text(3);
  std::string mechanism = text(5);
  bool admitted = false;
  std::string why;
  if (frames.size() < 6 || text(0) != "1.0") {
    why = "a malformed ZAP request";
  } else if (!creds.enabled) {
    admitted = true;  // insecure: no ZAP is configured; answer yes if asked
  } else if (text(2) == internal::kLocalZapDomain) {
    why = LocalRefusal(frames, creds);
    admitted = why.empty();
    if (!admitted) address = "the local process " + address + " (host:uid:gid:pid)";
  } else if (mechanism != "CURVE") {
    why = "it does not use CURVE security (no token, or started with --insecure)";
  } else if (frames.size() < 7 || frames[6].size() != crypto_box_PUBLICKEYBYTES ||
             sodium_memcmp(frames[6].data(), creds.public_key.data(), crypto_box_PUBLICKEYBYTES) !=
                 0) {
    why = "its key is not this cluster's: it holds a different token";
  } else {
    admitted = true;
  }
  if (!admitted) LogRefused(address, "this process", why);
  std::vector<std::string> reply = {"1.0",
                                    request_id,
                                    admitted ? "200" : "400",
                                    admitted ? "OK" : "not a member of this cluster",
                                    admitted ? "orrery" : "",
                                    ""};
  for (size_t i = 0; i < reply.size(); ++i) {
    rep.send(zmq::buffer(reply[i]),
             i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  return true;
}

void HandleMonitorEvents(Monitor& m) {
  uint16_t event = 0;
  uint32_t value = 0;
  for (int n = 0; n < 1024 && ReadMonitorEvent(*m.pair, &event, &value); ++n) {
    switch (event) {
      case ZMQ_EVENT_ACCEPTED:
        if (m.peers.size() < 65536) m.peers[int(value)] = PeerOf(int(value));
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
      case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
        m.failure = FailureReason(event, value);
        break;
      case ZMQ_EVENT_DISCONNECTED: {
        auto it = m.peers.find(int(value));
        if (!m.failure.empty())
          LogRefused(it == m.peers.end() ? "" : it->second, m.name, m.failure);
        m.failure.clear();
        if (it != m.peers.end()) m.peers.erase(it);
        break;
      }
      default:
        break;
    }
  }
}

void RunZap(std::shared_ptr<ZapHandler::State> state, std::unique_ptr<zmq::socket_t> rep,
            std::unique_ptr<zmq::socket_t> wake) {
  pthread_setname_np(pthread_self(), "orrery-zap");
  std::vector<std::unique_ptr<Monitor>> monitors;
  std::vector<zmq::pollitem_t> items;
  while (!state->stop.load()) {
    {
      MutexLock lock(&state->mu);
      for (auto& m : state->added) monitors.push_back(std::move(m));
      state->added.clear();
      for (uint64_t id : state->removed) {
        monitors.erase(std::remove_if(monitors.begin(), monitors.end(),
                                      [&](const auto& m) { return m->id == id; }),
                       monitors.end());
      }
      state->removed.clear();
    }
    items.clear();
    items.push_back({static_cast<void*>(*rep), 0, ZMQ_POLLIN, 0});
    items.push_back({static_cast<void*>(*wake), 0, ZMQ_POLLIN, 0});
    for (auto& m : monitors) items.push_back({static_cast<void*>(*m->pair), 0, ZMQ_POLLIN, 0});
    try {
      // Woken by a request, a handshake event or State::Wake; the timeout is a safety net.
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(10000));
      if (items[0].revents & ZMQ_POLLIN) {
        Credentials creds = ProcessCredentials();
        for (int n = 0; n < 256 && AnswerZap(*rep, creds); ++n) {
        }
      }
      if (items[1].revents & ZMQ_POLLIN) {
        zmq::message_t ignored;
        while (wake->recv(ignored, zmq::recv_flags::dontwait)) {
        }
      }
      for (size_t i = 0; i < monitors.size(); ++i) {
        if (items[i + 2].revents & ZMQ_POLLIN) HandleMonitorEvents(*monitors[i]);
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      if (e.num() != EINTR) LOG_WARN(std::string("the ZAP handler: ") + e.what());
    } catch (const std::exception& e) {
      LOG_WARN(std::string("the ZAP handler: ") + e.what());
    }
  }
  for (auto& m : monitors) m->pair->close();
  rep->close();
  wake->close();
}

std::atomic<uint64_t> g_next_monitor{1};
std::atomic<uint64_t> g_next_handler{1};

}  // namespace

ZapHandler::ZapHandler(zmq::context_t& context) : state_(std::make_shared<State>()) {
  state_->context = &context;
  auto rep = std::make_unique<zmq::socket_t>(context, zmq::socket_type::rep);
  rep->set(zmq::sockopt::linger, 0);
  rep->bind(kZapEndpoint);  // before any server socket accepts: no handler means no check
  std::string wake_endpoint = "inproc://orrery-zap-wake-" + std::to_string(getpid()) + "-" +
                              std::to_string(g_next_handler.fetch_add(1));
  auto wake_pull = std::make_unique<zmq::socket_t>(context, zmq::socket_type::pull);
  wake_pull->set(zmq::sockopt::linger, 0);
  wake_pull->bind(wake_endpoint);
  {
    MutexLock lock(&state_->mu);
    state_->wake = std::make_unique<zmq::socket_t>(context, zmq::socket_type::push);
    state_->wake->set(zmq::sockopt::linger, 0);
    state_->wake->set(zmq::sockopt::sndhwm, 16);
    state_->wake->connect(wake_endpoint);
  }
  {
    MutexLock lock(&g_zap_mu);
    g_zap_states[&context] = state_;
  }
  thread_ = std::thread(RunZap, state_, std::move(rep), std::move(wake_pull));
}

ZapHandler::~ZapHandler() {
  {
    MutexLock lock(&g_zap_mu);
    auto it = g_zap_states.find(state_->context);
    if (it != g_zap_states.end() && it->second == state_) g_zap_states.erase(it);
  }
  state_->stop = true;
  {
    MutexLock lock(&state_->mu);
    state_->Wake();
  }
  if (thread_.joinable()) thread_.join();
}

void EnsureZapHandler(zmq::context_t& context) {
  {
    MutexLock lock(&g_zap_mu);
    if (g_zap_states.count(&context)) return;
  }
  static std::mutex create_mu;
  std::lock_guard<std::mutex> lock(create_mu);
  {
    MutexLock l2(&g_zap_mu);
    if (g_zap_states.count(&context)) return;
  }
  // Lives as long as the process: the context it serves (the transport's) is never destroyed.
  // Held by a global so that leak checkers see it reachable.
  static std::vector<ZapHandler*>* process_handlers = new std::vector<ZapHandler*>();
  process_handlers->push_back(new ZapHandler(context));
}

uint64_t WatchHandshakes(zmq::context_t& context, zmq::socket_t& socket, const std::string& name) {
  if (!Enabled()) return 0;
  EnsureZapHandler(context);
  uint64_t id = g_next_monitor.fetch_add(1);
  std::string endpoint =
      "inproc://orrery-handshakes-" + std::to_string(getpid()) + "-" + std::to_string(id);
  int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL;
  if (zmq_socket_monitor(static_cast<void*>(socket), endpoint.c_str(), events) != 0) {
    LOG_WARN("cannot watch the handshakes of " + name + ": " + zmq_strerror(zmq_errno()));
    return 0;
  }
  auto m = std::make_unique<Monitor>();
  m->id = id;
  m->name = name;
  m->pair = std::make_unique<zmq::socket_t>(context, zmq::socket_type::pair);
  m->pair->set(zmq::sockopt::linger, 0);
  // No high-water mark: ZeroMQ's I/O thread sends these events blocking, so a full pipe
  // (a burst of thousands of connections) would stall every connection of the process.
  m->pair->set(zmq::sockopt::rcvhwm, 0);
  m->pair->connect(endpoint);
  std::shared_ptr<ZapHandler::State> state;
  {
    MutexLock lock(&g_zap_mu);
    auto it = g_zap_states.find(&context);
    if (it != g_zap_states.end()) state = it->second;
  }
  if (!state) return 0;
  MutexLock lock(&state->mu);
  state->added.push_back(std::move(m));
  state->Wake();
  return id;
}

void StopWatching(zmq::socket_t& socket, uint64_t id) {
  if (id == 0) return;
  if (socket) zmq_socket_monitor(static_cast<void*>(socket), nullptr, 0);
  MutexLock lock(&g_zap_mu);
  for (auto& [ctx, state] : g_zap_states) {
    MutexLock l2(&state->mu);
    state->removed.push_back(id);
    state->Wake();
  }
}

}  // namespace orrery::security
