// The direct same-host path of the transport (docs/protocol.md "Direct messages",
// docs/security.md "The same-host channel").
//
// Beside its ZeroMQ sockets, an inbox with a same-host channel listens on a Unix
// SOCK_SEQPACKET socket: the file of its ipc:// endpoint with ".d" appended, in the same
// 0700 folder. A sending thread that may deliver a message out of order with its others to
// that peer (a call, whose worker orders calls by sequence number; the reply of a call that
// streamed nothing) writes it there itself, with one sendmsg, instead of handing it to
// ZeroMQ's I/O thread: a message crosses one kernel queue and wakes one thread. Anything
// larger than kMaxMessageBytes, or that finds the connection full, goes through ZeroMQ.
//
// A connection is admitted once: its peer runs as this user (SO_PEERCRED, both ways), and
// its first message (the hello) carries this cluster's LocalSecret and this protocol
// version. The listener answers a hello it admits with one byte; only then does the sender
// use the connection, and from then on the listener reads everything it sends until it
// hangs up, so no message handed to the kernel is dropped unread. A connection refused
// (full, wrong secret or version) is closed before anything but its hello was sent.
//
// Each message is [4-byte little-endian frame 0 length][1 byte: 1 when a payload
// follows][frame 0][payload].
//
// Thread-safety: a Listener belongs to the thread running its inbox's loop (handed over
// with it); a Sender to the thread that sends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace orrery::transport::direct {

// The largest message (frame 0 and payload) that goes this way.
inline constexpr size_t kMaxMessageBytes = 64 * 1024;
// Connections one listener keeps at once, and at most an eighth of the process's descriptor
// limit (RLIMIT_NOFILE); past them a new one is refused (its sender uses ZeroMQ).
inline constexpr size_t kMaxConnections = 512;
// Appended to the same-host channel's socket file.
inline constexpr const char* kSuffix = ".d";

// Whether the direct path is on in this process: ORRERY_DIRECT_CHANNEL is not "0".
bool Enabled();

class Listener {
 public:
  Listener() = default;
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Binds and listens at `path`; false (with *why) when it cannot.
  bool Listen(const std::string& path, std::string* why);
  const std::string& path() const { return path_; }

  // The descriptors to poll: the listening one first, then each connection's.
  const std::vector<int>& fds() const { return fds_; }
  // Bumped whenever fds() changes.
  uint64_t generation() const { return generation_; }

  // One message read from a connection: frame 0 and the payload (has_payload when one
  // came), in the listener's buffer until its next read.
  struct Message {
    std::string_view frame0;
    std::string_view payload;
    bool has_payload = false;
  };
  // Accepts waiting connections when the listening descriptor is readable, then reads up to
  // `budget` messages from the connections whose descriptor is readable (`readable[i]` for
  // fds()[i]), calling `handle` for each; stops early when `handle` returns false (the loop
  // was handed to another thread: nothing here may be touched after). Returns the messages
  // read; *more is set when a connection still had messages at the budget.
  size_t Serve(const std::vector<bool>& readable, size_t budget,
               const std::function<bool(Message&)>& handle, bool* more);

 private:
  struct Connection {
    int fd = -1;
    bool admitted = false;  // its hello was checked and answered
  };
  void Accept();
  // Reads one message from `c` into *m: 1 a message, 2 its hello (admitted and answered),
  // 0 none waiting, -1 the connection ended or broke the protocol (to be closed).
  int ReadOne(Connection& c, Message* m);
  bool Admit(const Message& hello) const;
  void CloseAt(size_t i);
  void Refresh();

  std::string path_;
  int listen_fd_ = -1;
  size_t max_connections_ = kMaxConnections;
  std::vector<Connection> conns_;
  std::vector<int> fds_;
  uint64_t generation_ = 0;
  // Where messages are read into, allocated at the first (most inboxes never get one) and
  // left unfilled: only the pages a message reaches are touched.
  std::unique_ptr<char[]> buffer_;
};

class Sender {
 public:
  // Connects to the listener at `path` (the ipc endpoint's file + kSuffix) and sends the
  // hello; the connection is usable once the listener answered (Ready). Never blocks. With
  // the path off (Enabled) or no listener there, every Send says kBroken.
  explicit Sender(const std::string& path);
  ~Sender();
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  enum class Outcome { kSent, kNotNow, kBroken };
  // Sends frame0 (+ payload) when the connection is admitted and has room; kNotNow when it
  // is not admitted yet or is full (send through ZeroMQ instead), kBroken when it never will
  // be usable (refused, or the peer hung up).
  Outcome Send(std::string_view frame0, const std::string* payload);

 private:
  bool Ready();

  int fd_ = -1;
  bool admitted_ = false;
};

// The hello a sender of this process sends: exposed for the tests of hostile input.
std::string Hello();

}  // namespace orrery::transport::direct
