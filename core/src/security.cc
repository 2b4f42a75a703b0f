// The process's credentials and how sockets use them, the handshake probe, and where a
// process finds the cluster's token (docs/security.md). Token files and key derivation are
// in security_secrets.cc, the ZAP handler and handshake monitors in security_zap.cc.
#include "core/internal/security.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>
#include <zmq.hpp>

#include "core/internal/session_dir.h"
#include "core/internal/thread_annotations.h"
#include "core/internal/transport.h"
#include "core/src/security_internal.h"

namespace orrery::security {

namespace {

// What every "no token" and "wrong token" error tells the user.
constexpr const char* kWhereTheTokenIs =
    "pass the cluster's token file with ORRERY_TOKEN_FILE, --orrery-token-file or "
    "Config::token_file "
    "(`orrery start --head` writes it to <session dir>/token on the head's host, mode 0600; on "
    "that host it is "
    "found without being named); a cluster started with --insecure takes none (set "
    "ORRERY_INSECURE=1)";

Mutex g_credentials_mu;
// Never destroyed: the ZAP handler's thread reads it until the process ends, after static
// destructors have run.
Credentials* const g_credentials PT_GUARDED_BY(g_credentials_mu) = new Credentials();

}  // namespace

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
  socket.set(zmq::sockopt::zap_domain, internal::kZapDomain);
}

void ConfigureClient(zmq::socket_t& socket) {
  Credentials c = ProcessCredentials();
  if (!c.enabled) return;
  socket.set(zmq::sockopt::curve_serverkey, zmq::buffer(c.public_key));
  socket.set(zmq::sockopt::curve_publickey, zmq::buffer(c.public_key));
  socket.set(zmq::sockopt::curve_secretkey, zmq::buffer(c.secret_key));
}

std::string LocalSecret(const Credentials& credentials) {
  if (!credentials.enabled) return "";
  return Sha256Hex(std::string("orrery same-host channel\n") + credentials.secret_key);
}

void ConfigureLocalServer(zmq::context_t& context, zmq::socket_t& socket) {
  Credentials c = ProcessCredentials();
  if (!c.enabled) return;
  EnsureZapHandler(context);
  socket.set(zmq::sockopt::plain_server, 1);
  socket.set(zmq::sockopt::zap_domain, internal::kLocalZapDomain);
}

void ConfigureLocalClient(zmq::socket_t& socket) {
  Credentials c = ProcessCredentials();
  if (!c.enabled) return;
  socket.set(zmq::sockopt::plain_username, internal::kLocalUser);
  socket.set(zmq::sockopt::plain_password, LocalSecret(c));
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
    while (internal::ReadMonitorEvent(events, &event, &value)) {
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
  std::string root = SessionRoot();
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
    // Only a session whose start completed (cli/src/session.h): a failed start's token may
    // be the wrong one.
    auto started = j["values"].find("started");
    if (started == j["values"].end() || *started != "1") continue;
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
