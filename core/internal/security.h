// The cluster credential and how every connection uses it (docs/security.md).
//
// A cluster has one secret, the token (a file, mode 0600). Every process of the cluster
// derives one Curve25519 key pair from it, and every ZeroMQ socket speaks CURVE with that
// key pair: servers (inboxes, collective receivers) as CURVE servers whose ZAP handler
// admits only clients that prove they hold the cluster's key, senders as CURVE clients that
// expect the cluster's server key. A peer without the token can neither complete a
// handshake nor read the traffic; nothing it sends reaches a handler.
//
// Credentials are process-wide and set once, before the first socket (Init, the daemons'
// main, a worker's start); sockets read them when they are created. With `insecure` they
// are off and sockets use ZeroMQ's NULL mechanism, as before.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "orrery/status.h"

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace orrery::security {

// A new random token: 64 hex characters (32 bytes from the kernel's generator).
std::string NewToken();

// Reads a token file: at most 4 KiB, surrounding white space dropped, at least 32
// printable ASCII characters and nothing else. The errors name the file and what is wrong.
Result<std::string> ReadTokenFile(const std::string& path);
// Reads a secret of any printable content (a Redis password): at most 4 KiB, one line.
Result<std::string> ReadSecretFile(const std::string& path);

// Writes `content` to `path` with mode 0600 (created new or replaced atomically; the
// directory must exist).
Status WriteSecretFile(const std::string& path, const std::string& content);

// Constant-time comparison (for tokens and cookies).
bool SecretEquals(const std::string& a, const std::string& b);

// SHA-256 of bytes / of a file's content, as 64 lowercase hex characters; a file that
// cannot be read gives an error naming it.
std::string Sha256Hex(const std::string& bytes);
Result<std::string> Sha256File(const std::string& path);

struct Credentials {
  bool enabled = false;
  std::string public_key;  // 32 bytes, binary
  std::string secret_key;  // 32 bytes, binary
  std::string source;      // where the token came from, for error messages
};

// The key pair of the cluster whose token is `token` (a pure function of it).
Credentials FromToken(const std::string& token, const std::string& source);

// Sets this process's credentials. Fails (ConfigError-worthy) when libzmq lacks CURVE.
// Call before creating sockets; sockets already open keep what they had.
Status SetProcessCredentials(const Credentials& credentials);
// What sockets created now use.
Credentials ProcessCredentials();
bool Enabled();

// Socket set-up, applied by the transport and the collectives to every socket they create.
// ConfigureServer also makes sure the ZAP handler of `context` runs (see ZapHandler).
void ConfigureServer(zmq::context_t& context, zmq::socket_t& socket);
void ConfigureClient(zmq::socket_t& socket);

// The same-host channel (core/src/local_channel.h): an inbox's Unix socket and the senders
// that reach it there speak ZeroMQ's PLAIN mechanism, with LocalSecret() as the password.
// Nothing is encrypted (the kernel carries the bytes between two processes of this user);
// the ZAP handler admits a peer whose password is this cluster's and whose uid
// (SO_PEERCRED) is this process's. With credentials off: the NULL mechanism, and the socket
// folder's mode 0700 alone keeps other users out.
void ConfigureLocalServer(zmq::context_t& context, zmq::socket_t& socket);
void ConfigureLocalClient(zmq::socket_t& socket);
// 64 hex characters derived from the cluster's secret key (a pure function of the token);
// "" when credentials are off.
std::string LocalSecret(const Credentials& credentials);

// Watches a bound server socket's handshakes and logs (rate-limited) the address of every
// peer whose handshake failed: a wrong key or no CURVE at all never reaches the ZAP handler,
// so without this such peers would be refused silently. Returns an id for StopWatching;
// 0 when credentials are off. Call from the thread that owns `socket`, after binding.
uint64_t WatchHandshakes(zmq::context_t& context, zmq::socket_t& socket, const std::string& name);
// Stops watching `socket` (before it is closed, from the thread that owns it): the socket
// stops sending events first, then the reader goes. The other order would leave ZeroMQ's
// I/O thread blocked for good on an event nobody reads, and every connection of the
// process with it.
void StopWatching(zmq::socket_t& socket, uint64_t id);

// Answers ZAP requests of one ZeroMQ context: admits a CURVE client whose public key is the
// cluster's, refuses everyone else (logging the peer address, rate-limited). One runs for
// the transport's context for the life of the process; a context that is destroyed (the
// collectives') owns its handler and stops it first.
class ZapHandler {
 public:
  explicit ZapHandler(zmq::context_t& context);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  struct State;  // shared with the handler's thread and the registry (security.cc)

 private:
  std::shared_ptr<State> state_;
  std::thread thread_;
};
// Starts the handler of `context` unless one runs (the handler is registered per context).
void EnsureZapHandler(zmq::context_t& context);

// What a CURVE client learns by connecting to `address` (tcp://host:port) within
// `timeout_ms`: Ok when the handshake succeeded, PermissionDenied when the server refused
// it (wrong token, or one side insecure), Unavailable when nothing answered in time.
Status ProbeHandshake(const std::string& address, int timeout_ms);

// Where a process looks for the token when it is told nothing (docs/security.md): the
// newest started session of this host (values "started" = "1": its `orrery start` brought
// its daemons up) whose head is `head_address`. Empty when none.
std::string FindSessionTokenFile(const std::string& head_address);

// Sets this process's credentials from what it was told, in this order: `insecure` turns
// them off; `token_file` is read; else the token of this host's session whose head is
// `head_address` (FindSessionTokenFile). Returns the token file used ("" when insecure);
// PermissionDenied, saying where the token is expected, when there is none.
Result<std::string> UseCredentials(bool insecure, const std::string& token_file,
                                   const std::string& head_address);

// The text of the error a client shows when the head refuses its handshake.
std::string AuthFailedMessage(const std::string& address, const Credentials& used);

}  // namespace orrery::security
