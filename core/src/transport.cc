#include "core/internal/transport.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "core/internal/log.h"
#include "core/internal/rate_limit.h"
#include "core/internal/security.h"
#include "core/src/direct_channel.h"
#include "core/src/local_channel.h"

namespace orrery::transport {

// ---------------------------------------------------------------- Inbox

namespace {
// Bounds on a ROUTER's queues: past rcvhwm ZeroMQ stops reading from that peer's connection
// (TCP pushes back), past sndhwm it drops the error reply.
constexpr int kRouterRcvHwm = 100000;
constexpr int kRouterSndHwm = 1000;
// Connections waiting to be accepted (the kernel caps it at net.core.somaxconn).
constexpr int kListenBacklog = 4096;

RateLimitedLog g_loop_error_log;

// The inbox loop this thread runs, and which generation of it.
struct LoopOwner {
  const Inbox* inbox = nullptr;
  uint64_t generation = 0;
};
thread_local LoopOwner t_loop;
}  // namespace

bool Inbox::OwnsLoop() const {
  return t_loop.inbox == this && t_loop.generation == generation_.load();
}

void Inbox::HandOff(std::function<void()> first) {
  uint64_t next = generation_.load() + 1;
  generation_.store(next);
  std::thread([this, next, first = std::move(first)] {
    pthread_setname_np(pthread_self(), "orrery-inbox+");
    t_loop = {this, next};
    if (first) Guarded("a hand-off", first);
    if (OwnsLoop()) RunLoop(next);
    CloseThreadSockets();
  }).detach();
}

Inbox::Inbox() { wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

Inbox::~Inbox() {
  Stop();
  if (router_) {
    security::StopWatching(*router_, handshake_watch_);
    router_->close();
  }
  if (local_router_) {
    local_router_->close();
    local::RemoveOne(local_endpoint_);
  }
  if (direct_) {
    local::RemoveOne("ipc://" + direct_->path());
    direct_.reset();
  }
  if (wake_fd_ >= 0) close(wake_fd_);
}

std::unique_ptr<zmq::socket_t> Inbox::NewRouter() {
  auto router = std::make_unique<zmq::socket_t>(Context(), zmq::socket_type::router);
  router->set(zmq::sockopt::rcvhwm, kRouterRcvHwm);
  router->set(zmq::sockopt::sndhwm, kRouterSndHwm);
  router->set(zmq::sockopt::linger, 0);
  // Thousands of processes may connect at once (workers created together, each greeting
  // its driver): they wait in the kernel's queue (up to net.core.somaxconn) to be accepted
  // at the pace the inbox serves them, instead of ZeroMQ's 100 and retried SYNs.
  router->set(zmq::sockopt::backlog, kListenBacklog);
  router->set(zmq::sockopt::maxmsgsize, int64_t(max_message_bytes_));
  return router;
}

// Without it the inbox still works, over TCP only: a failure here is logged, not returned.
void Inbox::BindLocal(const std::string& advertised_host) {
  std::string endpoint = local::EndpointFor(advertised_host, port_);
  if (endpoint.empty()) return;
  try {
    auto router = NewRouter();
    security::ConfigureLocalServer(Context(), *router);
    router->bind(endpoint);
    local_router_ = std::move(router);
    local_endpoint_ = endpoint;
    local::RegisterOwn(endpoint);
  } catch (const zmq::error_t& e) {
    LOG_WARN("the inbox at " + address_ + " has no same-host channel (" + endpoint +
             "): " + e.what());
    return;
  }
  if (!direct::Enabled()) return;
  auto listener = std::make_unique<direct::Listener>();
  std::string path = endpoint.substr(6) + direct::kSuffix, why;
  if (!listener->Listen(path, &why)) {
    LOG_WARN("the inbox at " + address_ + " has no direct path: " + why);
    return;
  }
  local::RegisterOwn("ipc://" + path);
  direct_ = std::move(listener);
}

Status Inbox::Bind(const std::string& host, int port, const std::string& advertise_host) {
  try {
    router_ = NewRouter();
    security::ConfigureServer(Context(), *router_);
    router_->bind("tcp://" + host + ":" + (port ? std::to_string(port) : std::string("*")));
    std::string endpoint = router_->get(zmq::sockopt::last_endpoint);
    port_ = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
    std::string adv = advertise_host.empty()
                          ? (host == "0.0.0.0" || host == "*" ? "127.0.0.1" : host)
                          : advertise_host;
    address_ = "tcp://" + adv + ":" + std::to_string(port_);
    handshake_watch_ = security::WatchHandshakes(Context(), *router_, "the inbox at " + address_);
    BindLocal(adv);
    return Status::Ok();
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("cannot bind tcp://" + host + ":" + std::to_string(port) + ": " +
                               e.what());
  }
}

// libzmq's I/O thread wrote the string when the connection was made and hands it over with
// each message through its pipe, which ThreadSanitizer cannot see into (libzmq is not
// instrumented; tests/sanitizers/tsan.supp): it is copied here byte by byte, unchecked, and
// everything else works on the copy.
#if defined(__clang__)
__attribute__((no_sanitize("thread")))
#endif
std::string
PeerAddress(const zmq::message_t& frame) {
  const char* peer = zmq_msg_gets(frame.handle(), "Peer-Address");
  std::string copy;
  for (size_t i = 0; peer != nullptr && peer[i] != '\0' && i < 256; ++i) copy.push_back(peer[i]);
  return copy;
}

void RemoveLocalSockets() { local::RemoveOwn(); }

void ForgetLocalPeer(const std::string& address) { local::RemoveIfDead(address); }

void SampleLocalSockets() {
  if (std::string dir = local::Dir(); !dir.empty()) local::Sweep(dir, "", 16);
}

void Inbox::AddFd(int fd, std::function<void()> on_readable) {
  fds_.emplace_back(fd, std::move(on_readable));
}

void Inbox::SetTick(int period_ms, std::function<void()> tick) {
  tick_ms_ = period_ms;
  tick_ = std::move(tick);
}

void Inbox::SetTickPeriod(int period_ms) {
  if (tick_ms_.exchange(period_ms) == period_ms) return;
  tick_changed_ = true;
  Wake();
}

void Inbox::Start(Handler handler, const std::string& thread_name) {
  handler_ = std::move(handler);
  stop_ = false;
  thread_ = std::thread([this, thread_name] {
    pthread_setname_np(pthread_self(), thread_name.substr(0, 15).c_str());
    Loop();
    CloseThreadSockets();
  });
}

void Inbox::Wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
}

void Inbox::Post(std::function<void()> fn) {
  {
    MutexLock lock(&posted_mu_);
    posted_.push_back(std::move(fn));
  }
  Wake();
}

void Inbox::Stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  Wake();
  if (std::this_thread::get_id() == thread_.get_id()) {
    thread_.detach();
    return;
  }
  thread_.join();
}

void Inbox::ReplyError(zmq::socket_t& router, const std::string& identity,
                       const std::string& message) {
  static RateLimitedLog rejected_log;
  uint64_t suppressed = 0;
  if (rejected_log.ShouldLog(&suppressed)) {
    LOG_WARN("rejected a message on " + address_ + ": " + message +
             RateLimitedLog::More(suppressed));
  }
  if (identity.empty()) return;
  try {
    proto::ErrorMsg err{0, message};
    std::string f0 = proto::EncodeFrame(proto::MsgType::kError, err);
    router.send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    router.send(zmq::buffer(f0), zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    LOG_WARN(std::string("could not send an error reply: ") + e.what());
  }
}

void Inbox::RefuseVersion(zmq::socket_t& router, const std::string& identity,
                          const zmq::message_t& frame, const Status& why) {
  static RateLimitedLog refused_log;
  uint64_t suppressed = 0;
  if (refused_log.ShouldLog(&suppressed)) {
    std::string from = PeerAddress(frame);
    if (from.empty()) from = "a peer";
    LOG_WARN("refused a message on " + address_ + " from " + from + ": " + why.message() +
             RateLimitedLog::More(suppressed));
  }
  if (identity.empty()) return;
  // Answered in the layout every version reads (protocol_wire.h): the sender's transport
  // finds it on its connection and fails its next send to this address with both versions.
  try {
    std::string refusal = proto::EncodeVersionRefusal();
    router.send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    router.send(zmq::buffer(refusal), zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    LOG_WARN(std::string("could not send a version refusal: ") + e.what());
  }
}

void Inbox::HandleRaw(zmq::socket_t& router, std::vector<zmq::message_t>& frames) {
  std::string identity = frames.empty() ? std::string() : frames[0].to_string();
  if (frames.size() < 2 || frames.size() > 3) {
    ReplyError(router, identity,
               "expected 1 or 2 frames after the identity, got " +
                   std::to_string(frames.empty() ? 0 : frames.size() - 1));
    return;
  }
  Result<proto::Header> header = proto::DecodeHeader(frames[1].data(), frames[1].size());
  if (!header.ok() && header.status().code() == StatusCode::kIncompatible) {
    RefuseVersion(router, identity, frames[1], header.status());
    return;
  }
  if (!header.ok()) {
    ReplyError(router, identity, header.status().message());
    return;
  }
  Envelope env;
  env.type = header->type;
  env.identity = std::move(identity);
  env.frame0 = std::move(frames[1]);
  if (frames.size() == 3) {
    env.payload = std::move(frames[2]);
    env.has_payload = true;
  }
  Dispatch(router, env);
}

void Inbox::Dispatch(zmq::socket_t& router, Envelope& env) {
  try {
    Status handled = handler_(env);
    if (!handled.ok()) {
      ReplyError(
          router, env.identity,
          std::string("failed to handle ") + proto::TypeName(env.type) + ": " + handled.message());
    }
  } catch (const std::exception& e) {
    // Handlers report errors themselves; an exception here is a bug or bad input that got
    // through decoding. Keep serving.
    ReplyError(router, env.identity,
               std::string("failed to handle ") + proto::TypeName(env.type) + ": " + e.what());
  } catch (...) {
    ReplyError(
        router, env.identity,
        std::string("failed to handle ") + proto::TypeName(env.type) + ": unknown exception");
  }
}

void Inbox::Guarded(const char* what, const std::function<void()>& fn) {
  std::string error;
  try {
    fn();
    return;
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "unknown exception";
  }
  uint64_t suppressed = 0;
  if (g_loop_error_log.ShouldLog(&suppressed)) {
    LOG_ERROR(std::string("the inbox at ") + address_ + " caught an exception from " + what + ": " +
              error + RateLimitedLog::More(suppressed) + "; it goes on serving");
  }
}

bool Inbox::Drain(zmq::socket_t& router, std::vector<zmq::message_t>& frames, uint64_t generation) {
  for (int n = 0; n < 1024; ++n) {
    frames.clear();
    if (!zmq::recv_multipart(router, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
      return true;
    }
    HandleRaw(router, frames);
    if (generation_.load() != generation) return false;
  }
  return false;
}

bool Inbox::ServeDirect(const std::vector<zmq::pollitem_t>& items, size_t first,
                        uint64_t generation, bool* caught_up) {
  auto is_readable = [](const zmq::pollitem_t& item) {
    return (item.revents & (ZMQ_POLLIN | ZMQ_POLLERR)) != 0;
  };
  if (std::none_of(items.begin() + long(first), items.end(), is_readable)) return true;
  std::vector<bool> readable(items.size() - first);
  for (size_t i = first; i < items.size(); ++i) readable[i - first] = is_readable(items[i]);
  bool handed_off = false, more = false;
  direct_->Serve(
      readable, 1024,
      [&](direct::Listener::Message& m) {
        // Its hello named this protocol version: a header that does not decode is a broken
        // peer's, logged and dropped like any malformed message.
        Result<proto::Header> header = proto::DecodeHeader(m.frame0.data(), m.frame0.size());
        if (!header.ok()) {
          ReplyError(*router_, "", header.status().message());
          return true;
        }
        Envelope env;
        env.type = header->type;
        env.frame0 = zmq::message_t(m.frame0.data(), m.frame0.size());
        if (m.has_payload) {
          env.payload = zmq::message_t(m.payload.data(), m.payload.size());
          env.has_payload = true;
        }
        Dispatch(*router_, env);
        handed_off = generation_.load() != generation;
        return !handed_off;
      },
      &more);
  if (more) *caught_up = false;
  return !handed_off;
}

void Inbox::Loop() {
  t_loop = {this, generation_.load()};
  RunLoop(t_loop.generation);
}

void Inbox::RunLoop(uint64_t generation) {
  std::vector<zmq::pollitem_t> items;
  auto next_tick = std::chrono::steady_clock::now() + std::chrono::milliseconds(tick_ms_);
  std::vector<zmq::message_t> frames;
  // items: the wake fd, the fds added, the router, the same-host channel's router, then the
  // direct path's listener and connections.
  const size_t sockets = local_router_ ? 2 : 1;
  size_t direct_first = 0;
  uint64_t direct_seen = 0;
  while (!stop_) {
    // fds added from the inbox thread, direct connections come and gone
    if (direct_first != 1 + fds_.size() + sockets ||
        (direct_ && direct_->generation() != direct_seen)) {
      items.clear();
      items.push_back({nullptr, wake_fd_, ZMQ_POLLIN, 0});
      for (auto& [fd, cb] : fds_) items.push_back({nullptr, fd, ZMQ_POLLIN, 0});
      items.push_back({static_cast<void*>(*router_), 0, ZMQ_POLLIN, 0});
      if (local_router_) items.push_back({static_cast<void*>(*local_router_), 0, ZMQ_POLLIN, 0});
      direct_first = items.size();
      if (direct_) {
        direct_seen = direct_->generation();
        for (int fd : direct_->fds()) items.push_back({nullptr, fd, ZMQ_POLLIN, 0});
      }
    }
    auto now = std::chrono::steady_clock::now();
    if (tick_changed_.exchange(false)) next_tick = now + std::chrono::milliseconds(tick_ms_);
    long timeout =
        tick_
            ? std::max<long>(
                  0, std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - now).count())
            : 1000;
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(timeout));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      LOG_ERROR(std::string("inbox poll failed: ") + e.what());
      break;
    }
    if (stop_) break;
    if (items[0].revents & ZMQ_POLLIN) {
      uint64_t v;
      [[maybe_unused]] ssize_t n = read(wake_fd_, &v, sizeof(v));
      std::vector<std::function<void()>> posted;
      {
        MutexLock lock(&posted_mu_);
        posted.swap(posted_);
      }
      for (auto& fn : posted) Guarded("a posted function", fn);
      if (generation_.load() != generation) return;
    }
    for (size_t i = 0; i < fds_.size(); ++i)
      if (items[1 + i].revents & (ZMQ_POLLIN | ZMQ_POLLERR))
        Guarded("an fd callback", fds_[i].second);
    // The direct path first, then the routers (bounded, so ticks and posted work are not
    // starved).
    bool caught_up = true;
    if (direct_ && !ServeDirect(items, direct_first, generation, &caught_up)) return;
    caught_up = Drain(*router_, frames, generation) && caught_up;
    if (generation_.load() != generation) return;  // handed off: the sockets are not ours
    if (local_router_) {
      caught_up = Drain(*local_router_, frames, generation) && caught_up;
      if (generation_.load() != generation) return;
    }
    caught_up_ = caught_up;
    SweepThreadSockets();
    if (tick_ && std::chrono::steady_clock::now() >= next_tick) {
      Guarded("the tick", tick_);
      next_tick = std::chrono::steady_clock::now() + std::chrono::milliseconds(tick_ms_);
    }
  }
}

}  // namespace orrery::transport
