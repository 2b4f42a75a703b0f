// The object data channel's wire format and socket primitives (docs/protocol.md "Object
// transfer"), shared by the server (object_transfer.cc), the client (object_transfer_pull.cc)
// and the tests, which play hostile peers with them.
//
// Every frame is a fixed-size little-endian header that starts with a 4-byte magic and a 2-byte
// version. The handshake is three messages: ServerHello (server nonce), ClientHello (client
// nonce and its MAC over both nonces), ServerAccept (the server's MAC over both). Then the
// client sends Requests and the server answers each, in order, with a Reply followed by
// `length` payload bytes.
#pragma once

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "objects/internal/object_transfer.h"
#include "orrery/ids.h"
#include "orrery/status.h"

namespace orrery::objects::transfer {

constexpr uint16_t kVersion = 1;
constexpr uint64_t kMaxRequestBytes = uint64_t(64) << 20;  // one request's length
constexpr int kMaxConnections = 64;                        // per server
constexpr int kIdleTimeoutMs = 30000;      // server: no request (or no send progress) this long
constexpr int kHandshakeTimeoutMs = 5000;  // server: accept -> handshake done
constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;

using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

enum class HelloStatus : uint16_t { kOk = 0, kBusy = 1 };
enum class AcceptStatus : uint16_t { kOk = 0, kAuthFailed = 1, kAuthMismatch = 2 };
enum class ReplyStatus : uint16_t { kOk = 0, kNotFound = 1, kBadRequest = 2, kInternal = 3 };
constexpr uint16_t kFlagAuth = 1;

struct ServerHello {                              // server -> client on accept
  static constexpr uint32_t kMagic = 0x5358524F;  // "ORXS" as little-endian bytes
  static constexpr size_t kSize = 44;
  HelloStatus status = HelloStatus::kOk;
  uint16_t flags = 0;  // kFlagAuth: the server requires the challenge-response
  Nonce nonce{};
};
struct ClientHello {                              // client -> server
  static constexpr uint32_t kMagic = 0x4358524F;  // "ORXC"
  static constexpr size_t kSize = 72;
  uint16_t flags = 0;
  Nonce nonce{};
  Mac mac{};  // ClientMac(key, server nonce, client nonce) when kFlagAuth, else zero
};
struct ServerAccept {                             // server -> client: the handshake's outcome
  static constexpr uint32_t kMagic = 0x4158524F;  // "ORXA"
  static constexpr size_t kSize = 40;
  AcceptStatus status = AcceptStatus::kOk;
  Mac mac{};  // ServerMac(...) when kOk and authenticated, else zero
};
struct Request {  // client -> server: bytes [offset, offset + length) of object id
  static constexpr uint32_t kMagic = 0x5158524F;  // "ORXQ"
  static constexpr size_t kSize = 40;
  ObjectId id;
  uint64_t offset = 0;
  uint64_t length = 0;
};
struct Reply {  // server -> client, then `length` bytes when status is kOk
  static constexpr uint32_t kMagic = 0x5258524F;  // "ORXR"
  static constexpr size_t kSize = 48;
  ReplyStatus status = ReplyStatus::kOk;
  ObjectId id;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t object_size = 0;  // the whole object's size as the server holds it
};

// What a server bounds; kMax*/k*Timeout unless a test shortened them.
struct ServerLimits {
  int max_connections = kMaxConnections;
  int handshake_timeout_ms = kHandshakeTimeoutMs;
  int idle_timeout_ms = kIdleTimeoutMs;
};
// The limits a server started from now on keeps for its life. Tests shorten them.
void SetServerLimits(const ServerLimits& limits);
ServerLimits GetServerLimits();

// Encoders write exactly T::kSize bytes. Decoders check the magic, the version and the
// reserved fields, and return InvalidArgument naming what is wrong; they never read past
// kSize.
void Encode(const ServerHello& m, char* out);
void Encode(const ClientHello& m, char* out);
void Encode(const ServerAccept& m, char* out);
void Encode(const Request& m, char* out);
void Encode(const Reply& m, char* out);
Status Decode(const char* in, ServerHello* m);
Status Decode(const char* in, ClientHello* m);
Status Decode(const char* in, ServerAccept* m);
Status Decode(const char* in, Request* m);
Status Decode(const char* in, Reply* m);

Nonce RandomNonce();
// HMAC-SHA256 under `key` over a side's label and both nonces; the two labels differ so one
// side's MAC cannot be reflected as the other's.
Mac ClientMac(const std::string& key, const Nonce& server_nonce, const Nonce& client_nonce);
Mac ServerMac(const std::string& key, const Nonce& server_nonce, const Nonce& client_nonce);
bool MacEquals(const Mac& a, const Mac& b);  // constant time

// How long a socket wait may last. Every wait ends at the first of: `stall_ms` without
// progress, the absolute `deadline` (monotonic seconds; 0 = none), `wake_fd` readable (an
// eventfd the owner writes to stop everything), `*stop` or `*cancel` set (checked at least every
// kCancelSliceMs while waiting).
struct Bounds {
  int stall_ms = 10000;
  double deadline = 0;
  int wake_fd = -1;
  const std::atomic<bool>* stop = nullptr;
  const std::atomic<bool>* cancel = nullptr;
};
constexpr int kCancelSliceMs = 50;

// Both act on a non-blocking socket and return OK, Unavailable (peer closed, socket error,
// stall or deadline), or Cancelled (wake_fd, stop or cancel). RecvExact reads exactly n bytes
// and no more.
Status RecvExact(int fd, char* buf, size_t n, const Bounds& bounds);
Status SendAll(int fd, iovec* iov, int iovcnt, const Bounds& bounds);
Status SendBytes(int fd, const char* buf, size_t n, const Bounds& bounds);

// Socket set-up for both sides: non-blocking, close-on-exec, TCP_NODELAY, and the socket
// buffer sizes that measured fastest (see object_transfer_wire.cc).
void ConfigureSocket(int fd);
// The SO_SNDBUF/SO_RCVBUF that ConfigureSocket sets from now on; 0 (the default) leaves the
// kernel's autotuning on. For the benchmark, which compares the two.
void SetSocketBufferBytes(int bytes);
// Requests a PullObject connection keeps in flight (default 2, clamped to [1, 64]); for the
// benchmark.
void SetRequestsInFlight(int n);

// "host:port" (host an IPv4 address, a name, or an IPv6 address in brackets) -> its parts.
Status SplitAddress(const std::string& address, std::string* host, uint16_t* port);
// A non-blocking TCP connection to address, within timeout_ms.
Result<int> Connect(const std::string& address, int timeout_ms, const Bounds& bounds);

// The handshake, client and server side, on a connected socket (docs/protocol.md). The client
// returns PermissionDenied when authentication fails either way, Unavailable when the server is
// busy or gone, InvalidArgument when it does not speak the protocol. The server returns
// PermissionDenied for a client that failed (it has been told), InvalidArgument for one that
// does not speak the protocol, Unavailable when it left or the deadline passed.
Status ClientHandshake(int fd, const TransferKey& key, const Bounds& bounds);
Status ServerHandshake(int fd, const TransferKey& key, const Bounds& bounds);

}  // namespace orrery::objects::transfer
