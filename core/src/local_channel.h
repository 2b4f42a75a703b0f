// The same-host channel of the transport (docs/protocol.md "Processes of one host",
// docs/security.md "The same-host channel").
//
// Besides its TCP address, every inbox listens on a Unix socket in a folder of this user's
// and this network namespace's: <SessionRoot()>/ipc-<uid>-<netns inode>/, mode 0700. A
// sender that opens a connection to tcp://H:P first looks there for H:P's socket; when one
// is listening and its owner (SO_PEERCRED) is this user, the connection goes over it with
// ZeroMQ's PLAIN mechanism (a secret derived from the cluster's token, checked by the ZAP
// handler together with the peer's uid) instead of TCP with CURVE: no per-message
// encryption and no Curve25519 handshake between processes of one host and one user.
// Everything else, and everything that crosses hosts, uses TCP+CURVE.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <ctime>
#include <string>

namespace zmq {
class socket_t;
}  // namespace zmq

namespace orrery::transport::local {

// The folder of the inbox sockets, created on first use; "" when the channel is off:
// ORRERY_LOCAL_CHANNEL=0, no /proc/self/ns/net, or a folder that cannot be made safe (not
// a directory of this user's with mode 0700 under a parent only its owner or root may
// rename in, or a path too long for a Unix socket). Computed (ComputeDir) on first use and
// again whenever ORRERY_TMPDIR or ORRERY_LOCAL_CHANNEL has changed since.
std::string Dir();

// What Dir() is computed from, now: $ORRERY_TMPDIR/ipc-<uid>-<netns> when ORRERY_TMPDIR is
// set; otherwise /dev/shm/orrery-ipc-<uid>-<netns> where /dev/shm is a tmpfs and the folder
// can be made safe, else /tmp/orrery/ipc-<uid>-<netns> (docs/security.md "The same-host
// channel").
std::string ComputeDir();

// Checks `dir` as Dir() does (creating it when missing): empty when it is safe, else why not.
std::string CheckDir(const std::string& dir);

// The ipc:// endpoint an inbox advertised as tcp://<host>:<port> listens on; "" when the
// channel is off or the path would be too long.
std::string EndpointFor(const std::string& host, int port);

// The socket file a sending socket was connected to, as it was then. The kernel gives a
// TCP port out again soon after its process ends (no TIME_WAIT keeps it, as no TCP
// connection to it was made), and the next inbox on that port binds the same path anew: a
// socket still connected to the former file would reach it only at its next reconnect,
// up to seconds later.
struct Peer {
  std::string path;  // "" when the connection is over TCP
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t ctime_ns = 0;
};

// For an address tcp://H:P: the ipc:// endpoint of that inbox when its socket exists in
// Dir(), accepts a connection, and belongs to a process of this user (SO_PEERCRED); ""
// otherwise (the sender uses TCP). A socket file nobody listens on (its process died) is
// removed.
std::string Resolve(const std::string& tcp_address);

// A socket file nobody listens on is removed once it is this old (seconds): a younger one
// may belong to a process between its bind() and its listen().
constexpr time_t kStaleAfterS = 2;

// Whether a process of this user listens on the socket file at `path` (a connect is
// accepted, SO_PEERCRED names this user). A socket file nobody listens on is removed when
// it is at least `stale_after_s` old. `stamp`, when given, receives the file's identity.
bool ProbePath(const std::string& path, Peer* stamp = nullptr, time_t stale_after_s = kStaleAfterS);

// Removes the socket file at `path`, which refused a connection, when it is still the file
// `seen` (lstat before the connect) and at least `stale_after_s` old. Between that lstat and
// the connect a restarting process may have replaced the file with its own, bound and not yet
// listening: that one is kept.
void RemoveIfStillStale(const std::string& path, const struct stat& seen, time_t stale_after_s);

// The process whose inbox was at `tcp_address` has ended (its node saw it exit): removes
// that inbox's socket file unless something listens on it, whatever its age (a killed
// worker's own removal never ran).
void RemoveIfDead(const std::string& tcp_address);

// Probes `samples` entries of `dir` (but `self`) picked at random, so that socket files
// nobody listens on are removed (ProbePath): with a node sampling its folder on every
// heartbeat, the folder stays near the number of live inboxes though killed processes
// remove nothing. Files younger than `stale_after_s` are kept (ProbePath).
void Sweep(const std::string& dir, const std::string& self, size_t samples,
           time_t stale_after_s = kStaleAfterS);

// This process's own socket files: RegisterOwn records one it made, RemoveOne unlinks and
// forgets one whose socket was closed (ZeroMQ unlinks it too, but from its I/O thread, which
// may not get to it before the process exits), RemoveOwn unlinks those still there (before
// _exit, which skips the destructors that would).
void RegisterOwn(const std::string& endpoint);
void RemoveOne(const std::string& endpoint);
void RemoveOwn();

// Connects a new sending socket to the inbox at `address`: to Resolve(address) with the
// same-host channel's mechanism when there is one, else to `address` with CURVE.
Peer Connect(zmq::socket_t& socket, const std::string& address);

// Whether another file now stands at `peer`'s path (a later process bound it): the sending
// socket connected to the former must give way to a new one. False over TCP, and while the
// file is the same or gone (what it holds must not reach a later process at the address over
// TCP).
bool Replaced(const Peer& peer);

// Whether the process `peer` names has ended: its socket file is gone (a process removes its
// files as it ends) or another process's now. What a sending socket still holds for it can
// never be delivered. False over TCP.
bool Ended(const Peer& peer);

// Whether ZeroMQ's peer address of a Unix-socket connection ("localhost:<uid>:<gid>:<pid>",
// the credentials from SO_PEERCRED) names the user `uid`.
bool PeerIsUser(const std::string& peer_address, uid_t uid);

}  // namespace orrery::transport::local
