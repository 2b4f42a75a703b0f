#include "core/src/security.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sodium.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>
#include <zmq.hpp>

#include "core/src/log.h"
#include "core/src/rate_limit.h"
#include "core/src/thread_annotations.h"
#include "core/src/transport.h"

namespace orrery::security {

namespace {

constexpr size_t kMaxSecretFileBytes = 4096;
constexpr size_t kMinTokenChars = 32;
constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr const char* kZapDomain = "orrery";
// What every "no token" and "wrong token" error tells the user.
constexpr const char* kWhereTheTokenIs =
    "pass the cluster's token file with ORRERY_TOKEN_FILE, --orrery-token-file or "
    "Config::token_file "
    "(`orrery start --head` writes it to <session dir>/token on the head's host, mode 0600; on "
    "that host it is "
    "found without being named); a cluster started with --insecure takes none (set "
    "ORRERY_INSECURE=1)";

void InitSodium() {
  static const int rc = sodium_init();  // 0, or 1 when already initialised
  if (rc < 0) LOG_ERROR("libsodium could not be initialised");
}

std::string Hex(const unsigned char* data, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(d[data[i] >> 4]);
    out.push_back(d[data[i] & 15]);
  }
  return out;
}

Result<std::string> ReadSmallFile(const std::string& path, const char* what) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::NotFound("cannot read the " + std::string(what) + " " + path + ": " +
                            std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return Status::InvalidArgument("the " + std::string(what) + " " + path +
                                   " is not a regular file");
  }
  if (size_t(st.st_size) > kMaxSecretFileBytes) {
    close(fd);
    return Status::InvalidArgument("the " + std::string(what) + " " + path + " is " +
                                   std::to_string(st.st_size) + " bytes; at most " +
                                   std::to_string(kMaxSecretFileBytes) + " are allowed");
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    static RateLimitedLog mode_log(60);
    uint64_t suppressed = 0;
    if (mode_log.ShouldLog(&suppressed)) {
      LOG_WARN("the " + std::string(what) + " " + path + " can be read by other users (mode " +
               std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
               std::to_string(st.st_mode & 7) + "); chmod 600 it");
    }
  }
  std::string content(kMaxSecretFileBytes + 1, '\0');
  size_t got = 0;
  while (got < content.size()) {
    ssize_t n = read(fd, content.data() + got, content.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += size_t(n);
  }
  close(fd);
  content.resize(got);
  if (got > kMaxSecretFileBytes) {
    return Status::InvalidArgument("the " + std::string(what) + " " + path + " is larger than " +
                                   std::to_string(kMaxSecretFileBytes) + " bytes");
  }
  auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!content.empty() && space(content.back())) content.pop_back();
  size_t start = 0;
  while (start < content.size() && space(content[start])) ++start;
  return content.substr(start);
}

bool Printable(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// ---------------------------------------------------------------- process credentials

Mutex g_credentials_mu;
// Never destroyed: the ZAP handler's thread reads it until the process ends, after static
// destructors have run.
Credentials* const g_credentials PT_GUARDED_BY(g_credentials_mu) = new Credentials();

// ---------------------------------------------------------------- ZAP handlers and monitors

RateLimitedLog g_refused_log(5.0);

void LogRefused(const std::string& peer, const std::string& where, const std::string& why) {
  uint64_t suppressed = 0;
  if (!g_refused_log.ShouldLog(&suppressed)) return;
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

// Reads one monitor event: (event, value, endpoint). False when none is waiting.
bool ReadEvent(zmq::socket_t& pair, uint16_t* event, uint32_t* value) {
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
  for (int n = 0; n < 1024 && ReadEvent(*m.pair, &event, &value); ++n) {
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

// ---------------------------------------------------------------- tokens, files, hashes

std::string NewToken() {
  InitSodium();
  unsigned char bytes[32];
  randombytes_buf(bytes, sizeof(bytes));
  return Hex(bytes, sizeof(bytes));
}

Result<std::string> ReadTokenFile(const std::string& path) {
  auto content = ReadSmallFile(path, "cluster token file");
  if (!content.ok()) return content.status();
  const std::string& t = content.value();
  if (t.size() < kMinTokenChars || !Printable(t)) {
    return Status::InvalidArgument(
        "the cluster token file " + path + " does not hold a token (at least " +
        std::to_string(kMinTokenChars) +
        " printable characters without spaces; `orrery start --head` writes one)");
  }
  return t;
}

Result<std::string> ReadSecretFile(const std::string& path) {
  auto content = ReadSmallFile(path, "secret file");
  if (!content.ok()) return content.status();
  const std::string& t = content.value();
  if (t.empty() || t.find('\n') != std::string::npos || t.find('\0') != std::string::npos) {
    return Status::InvalidArgument("the secret file " + path + " must hold one non-empty line");
  }
  return t;
}

Status WriteSecretFile(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  unlink(tmp.c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::Unavailable("cannot create " + tmp + ": " + std::strerror(errno));
  std::string data = content + "\n";
  bool ok = fchmod(fd, 0600) == 0 && write(fd, data.data(), data.size()) == ssize_t(data.size()) &&
            fsync(fd) == 0;
  int err = errno;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) err = errno;
    unlink(tmp.c_str());
    return Status::Unavailable("cannot write " + path + ": " + std::strerror(err));
  }
  return Status::Ok();
}

bool SecretEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  return a.empty() || sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string Sha256Hex(const std::string& bytes) {
  InitSodium();
  unsigned char out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(out, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return Hex(out, sizeof(out));
}

Result<std::string> Sha256File(const std::string& path) {
  InitSodium();
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("cannot read " + path + ": " + std::strerror(errno));
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  std::vector<unsigned char> buf(1 << 16);
  while (true) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return Status::Unavailable("cannot read " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    crypto_hash_sha256_update(&st, buf.data(), size_t(n));
  }
  close(fd);
  unsigned char out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&st, out);
  return Hex(out, sizeof(out));
}

// ---------------------------------------------------------------- credentials

Credentials FromToken(const std::string& token, const std::string& source) {
  InitSodium();
  // The secret key is a hash of the token under a fixed label, so every holder of the token
  // derives the same pair and nobody else can; Curve25519 accepts any 32 bytes as a secret.
  unsigned char secret[crypto_box_SECRETKEYBYTES];
  unsigned char hashed[crypto_hash_sha256_BYTES];
  std::string label = "orrery cluster curve key v1\n" + token;
  crypto_hash_sha256(hashed, reinterpret_cast<const unsigned char*>(label.data()), label.size());
  std::memcpy(secret, hashed, sizeof(secret));
  unsigned char pub[crypto_box_PUBLICKEYBYTES];
  crypto_scalarmult_base(pub, secret);
  Credentials c;
  c.enabled = true;
  c.secret_key.assign(reinterpret_cast<const char*>(secret), sizeof(secret));
  c.public_key.assign(reinterpret_cast<const char*>(pub), sizeof(pub));
  c.source = source;
  sodium_memzero(secret, sizeof(secret));
  sodium_memzero(hashed, sizeof(hashed));
  return c;
}

Status SetProcessCredentials(const Credentials& credentials) {
  if (credentials.enabled && !zmq_has("curve")) {
    return Status::InvalidArgument(
        "this libzmq was built without CURVE security (zmq_has(\"curve\") is false), so the "
        "cluster cannot be "
        "authenticated; install Debian's libzmq5 (built with libsodium) or run with --insecure");
  }
  MutexLock lock(&g_credentials_mu);
  *g_credentials = credentials;
  return Status::Ok();
}

Credentials ProcessCredentials() {
  MutexLock lock(&g_credentials_mu);
  return *g_credentials;
}

bool Enabled() {
  MutexLock lock(&g_credentials_mu);
  return g_credentials->enabled;
}

void ConfigureServer(zmq::context_t& context, zmq::socket_t& socket) {
  Credentials c = ProcessCredentials();
  if (!c.enabled) return;
  EnsureZapHandler(context);
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_secretkey, zmq::buffer(c.secret_key));
  socket.set(zmq::sockopt::zap_domain, kZapDomain);
}

void ConfigureClient(zmq::socket_t& socket) {
  Credentials c = ProcessCredentials();
  if (!c.enabled) return;
  socket.set(zmq::sockopt::curve_serverkey, zmq::buffer(c.public_key));
  socket.set(zmq::sockopt::curve_publickey, zmq::buffer(c.public_key));
  socket.set(zmq::sockopt::curve_secretkey, zmq::buffer(c.secret_key));
}

namespace {
// What the monitor `events` of a probing client says of its handshake with `address` by
// the deadline.
Status AwaitHandshake(zmq::socket_t& events, const std::string& address, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool connected = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    zmq::pollitem_t item{static_cast<void*>(events), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, left);
    uint16_t event = 0;
    uint32_t value = 0;
    while (ReadEvent(events, &event, &value)) {
      switch (event) {
        case ZMQ_EVENT_CONNECTED:
          connected = true;
          break;
        case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
          return Status::Ok();
        case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
          return Status::PermissionDenied("the server at " + address +
                                          " refused this process's key");
        case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
          return Status::PermissionDenied("the handshake with " + address + " failed");
        case ZMQ_EVENT_DISCONNECTED:
          if (connected) {
            return Status::PermissionDenied("the server at " + address +
                                            " closed the connection during the handshake");
          }
          break;
        default:
          break;
      }
    }
  }
  return Status::Unavailable(connected
                                 ? "the server at " + address +
                                       " accepted the connection but never finished the handshake"
                                 : "nothing answers at " + address);
}
}  // namespace

Status ProbeHandshake(const std::string& address, int timeout_ms) {
  static std::atomic<uint64_t> next{1};
  zmq::context_t& ctx = transport::Context();
  try {
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    ConfigureClient(dealer);
    std::string endpoint =
        "inproc://orrery-probe-" + std::to_string(getpid()) + "-" + std::to_string(next++);
    int watched = ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                  ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                  ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
    if (zmq_socket_monitor(static_cast<void*>(dealer), endpoint.c_str(), watched) != 0) {
      return Status::Internal(std::string("cannot watch a handshake: ") +
                              zmq_strerror(zmq_errno()));
    }
    zmq::socket_t events(ctx, zmq::socket_type::pair);
    events.set(zmq::sockopt::linger, 0);
    events.connect(endpoint);
    dealer.connect(address);
    Status outcome = AwaitHandshake(events, address, timeout_ms);
    zmq_socket_monitor(static_cast<void*>(dealer), nullptr, 0);
    return outcome;
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("cannot connect to " + address + ": " + e.what());
  }
}

std::string FindSessionTokenFile(const std::string& head_address) {
  namespace fs = std::filesystem;
  auto strip = [](std::string a) {
    if (a.rfind("tcp://", 0) == 0) a = a.substr(6);
    return a;
  };
  std::string want = strip(head_address);
  const char* t = std::getenv("ORRERY_TMPDIR");
  std::string root = t && *t ? t : "/tmp/orrery";
  std::vector<std::pair<fs::file_time_type, std::string>> dirs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.is_symlink(ec) || !entry.is_directory(ec)) continue;
    if (entry.path().filename().string().rfind("session_", 0) != 0) continue;
    dirs.emplace_back(fs::last_write_time(entry.path(), ec), entry.path().string());
  }
  std::sort(dirs.rbegin(), dirs.rend());
  for (const auto& [when, dir] : dirs) {
    std::ifstream in(dir + "/session.json");
    if (!in) continue;
    std::string text(64 * 1024, '\0');
    in.read(text.data(), std::streamsize(text.size()));
    text.resize(size_t(in.gcount()));
    auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("values") || !j["values"].is_object()) continue;
    auto it = j["values"].find("head_address");
    if (it == j["values"].end() || !it->is_string() || strip(it->get<std::string>()) != want)
      continue;
    if (fs::exists(dir + "/token", ec)) return dir + "/token";
  }
  return "";
}

Result<std::string> UseCredentials(bool insecure, const std::string& token_file,
                                   const std::string& head_address) {
  if (insecure) {
    if (Status s = SetProcessCredentials(Credentials{}); !s.ok()) return s;
    return std::string();
  }
  std::string file = token_file;
  if (file.empty() && !head_address.empty()) file = FindSessionTokenFile(head_address);
  if (file.empty()) {
    std::string a = head_address.rfind("tcp://", 0) == 0 ? head_address.substr(6) : head_address;
    return Status::PermissionDenied("no cluster token" +
                                    (a.empty() ? std::string() : " for the cluster at " + a) +
                                    ": " + kWhereTheTokenIs);
  }
  auto token = ReadTokenFile(file);
  if (!token.ok()) return Status::PermissionDenied(token.status().message());
  if (Status s = SetProcessCredentials(FromToken(token.value(), file)); !s.ok()) return s;
  return file;
}

std::string AuthFailedMessage(const std::string& address, const Credentials& used) {
  std::string a = address.rfind("tcp://", 0) == 0 ? address.substr(6) : address;
  std::string msg = "authentication with the cluster at " + a + " failed: ";
  if (used.enabled) {
    msg += "it refused the cluster token read from " + used.source + "; ";
  } else {
    msg += "this process runs with --insecure (no token) and the cluster requires one; ";
  }
  return msg + kWhereTheTokenIs;
}

}  // namespace orrery::security
