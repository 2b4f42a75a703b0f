#include "core/src/local_channel.h"

#include <dirent.h>
#include <linux/magic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <random>
#include <vector>
#include <zmq.hpp>

#include "core/internal/security.h"
#include "core/internal/session_dir.h"
#include "core/src/direct_channel.h"

namespace orrery::transport::local {

namespace {

constexpr size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;

// A socket's file name: the advertised host and port, with every character that is not a
// letter, digit, '.' or '-' replaced (IPv6 colons, brackets, anything a host name from a
// flag may hold).
std::string FileName(const std::string& host, int port) {
  std::string name;
  name.reserve(host.size() + 8);
  for (char c : host) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '-';
    name.push_back(plain ? c : '_');
  }
  return name + "_" + std::to_string(port);
}

// "tcp://H:P" -> (H, P); false for anything else.
bool SplitTcp(const std::string& address, std::string* host, int* port) {
  constexpr std::string_view kScheme = "tcp://";
  if (address.compare(0, kScheme.size(), kScheme) != 0) return false;
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon < kScheme.size() + 1 || colon + 1 >= address.size())
    return false;
  int p = 0;
  for (size_t i = colon + 1; i < address.size(); ++i) {
    char c = address[i];
    if (c < '0' || c > '9' || p > 65535) return false;
    p = p * 10 + (c - '0');
  }
  if (p <= 0 || p > 65535) return false;
  *host = address.substr(kScheme.size(), colon - kScheme.size());
  *port = p;
  return true;
}

// The socket files this process bound (RegisterOwn); few: one per inbox.
std::mutex g_own_mu;
std::vector<std::string>* const g_own = new std::vector<std::string>();  // never destroyed

// The socket folder of this user and network namespace (`<netns>` is the inode of
// /proc/self/ns/net), under `root` with `prefix`; "" when it cannot be used (CheckDir) or its
// paths would be too long.
std::string FolderIn(const std::string& root, const std::string& prefix, uid_t uid,
                     unsigned long long netns) {
  std::string dir = root + "/" + prefix + std::to_string(uid) + "-" + std::to_string(netns);
  // Room at least for an IPv4 address and a port ("255.255.255.255_65535"); an inbox whose
  // advertised host makes its path too long has no socket here (EndpointFor), and its
  // senders, which find no path for it either, use TCP.
  if (dir.size() + 1 + 21 > kMaxSocketPath) return "";
  return CheckDir(dir).empty() ? dir : "";
}

Peer StampOf(const struct stat& st, const std::string& path) {
  return Peer{path, st.st_dev, st.st_ino,
              int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

// The same file as when it was stamped: neither removed and made again nor changed.
bool SameFile(const Peer& a, const Peer& b) {
  return a.dev == b.dev && a.ino == b.ino && a.ctime_ns == b.ctime_ns;
}

// What stands at `peer`'s path now, against the file a socket was connected to.
enum class AtPath { kTcp, kSame, kAnother, kNothing, kUnknown };
AtPath LookAt(const Peer& peer) {
  if (peer.path.empty()) return AtPath::kTcp;
  struct stat st {};
  if (lstat(peer.path.c_str(), &st) != 0)
    return errno == ENOENT ? AtPath::kNothing : AtPath::kUnknown;
  return SameFile(StampOf(st, peer.path), peer) ? AtPath::kSame : AtPath::kAnother;
}

}  // namespace

// /dev/shm before /tmp/orrery: every worker binds socket files and its end removes them, and
// a disk file system pays for each new file (ext4 without a journal scans the inodes freed in
// the last seconds to minutes before it reuses one; on such a host that was half of a fresh
// worker's start).
std::string ComputeDir() {
  const char* off = std::getenv("ORRERY_LOCAL_CHANNEL");
  if (off != nullptr && std::string(off) == "0") return "";
  struct stat ns {};
  if (stat("/proc/self/ns/net", &ns) != 0) return "";  // namespaces cannot be told apart
  const auto netns = static_cast<unsigned long long>(ns.st_ino);
  struct statfs fs {};
  if (!SessionRootIsChosen() && statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC) {
    if (std::string dir = FolderIn("/dev/shm", "orrery-ipc-", geteuid(), netns); !dir.empty())
      return dir;
  }
  return FolderIn(SessionRoot(), "ipc-", geteuid(), netns);
}

void RemoveIfStillStale(const std::string& path, const struct stat& seen, time_t stale_after_s) {
  struct stat now {};
  if (lstat(path.c_str(), &now) != 0 || !SameFile(StampOf(now, path), StampOf(seen, path)) ||
      time(nullptr) - now.st_mtime < stale_after_s)
    return;
  unlink(path.c_str());
}

bool ProbePath(const std::string& path, Peer* stamp, time_t stale_after_s) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
    return false;
  }
  if (stamp != nullptr) *stamp = StampOf(st, path);
  // Is anyone listening, and who? A connect to a listening Unix socket completes at once
  // (or fails with EAGAIN when its backlog is full: then TCP).
  // The direct path's files (direct_channel.h) take SOCK_SEQPACKET connections.
  const std::string_view suffix = direct::kSuffix;
  const bool seqpacket = path.size() > suffix.size() &&
                         path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  int fd =
      socket(AF_UNIX, (seqpacket ? SOCK_SEQPACKET : SOCK_STREAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 || path.size() > kMaxSocketPath) {
    if (fd >= 0) close(fd);
    return false;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  bool ours = false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    ucred cred{};
    socklen_t len = sizeof(cred);
    ours = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == geteuid();
  } else if (errno == ECONNREFUSED) {
    // Left by a process that died; its address now answers on TCP.
    RemoveIfStillStale(path, st, stale_after_s);
  }
  close(fd);
  return ours;
}

std::string CheckDir(const std::string& dir) {
  size_t slash = dir.rfind('/');
  if (dir.empty() || dir[0] != '/' || slash == 0) return dir + " is not an absolute path below /";
  std::string parent = dir.substr(0, slash);
  if (mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
    return "cannot create " + parent + ": " + std::strerror(errno);
  }
  struct stat st {};
  if (lstat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return parent + " is not a folder";
  // Nobody but its owner (this user or root) may rename or replace what it holds, unless
  // the sticky bit keeps each entry to its own owner (as in /tmp).
  if (st.st_uid != geteuid() && st.st_uid != 0) return parent + " belongs to another user";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return parent + " may be written by other users";
  }
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return "cannot create " + dir + ": " + std::strerror(errno);
  }
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return dir + " is not a folder";
  if (st.st_uid != geteuid()) return dir + " belongs to another user";
  if ((st.st_mode & 077) != 0) return dir + " is open to other users (mode not 0700)";
  return "";
}

std::string Dir() {
  // What ComputeDir reads: a process that moves its session root (a test giving each
  // cluster its own ORRERY_TMPDIR, whose folder it removes afterwards) gets the new folder.
  const char* off = std::getenv("ORRERY_LOCAL_CHANNEL");
  std::string key = SessionRoot() + '\n' + (off != nullptr ? off : "");
  static std::mutex mu;
  static std::string computed_for;  // "" until the first call: every key holds a '\n'
  static std::string dir;
  std::lock_guard<std::mutex> lock(mu);
  if (key != computed_for) {
    dir = ComputeDir();
    computed_for = std::move(key);
  }
  return dir;
}

std::string EndpointFor(const std::string& host, int port) {
  std::string dir = Dir();
  if (dir.empty() || port <= 0) return "";
  std::string path = dir + "/" + FileName(host, port);
  if (path.size() > kMaxSocketPath) return "";
  return "ipc://" + path;
}

namespace {
// The ipc:// endpoint of the inbox at tcp://H:P, whether or not its file exists; "" when
// there is none (the channel is off, not a TCP address, a path too long).
std::string EndpointOf(const std::string& tcp_address) {
  std::string host;
  int port = 0;
  if (!SplitTcp(tcp_address, &host, &port)) return "";
  return EndpointFor(host, port);
}

// Resolve, with the identity of the file found.
std::string ResolveStamped(const std::string& tcp_address, Peer* stamp) {
  std::string endpoint = EndpointOf(tcp_address);
  if (endpoint.empty()) return "";
  return ProbePath(endpoint.substr(6), stamp) ? endpoint : "";  // past "ipc://"
}
}  // namespace

std::string Resolve(const std::string& tcp_address) { return ResolveStamped(tcp_address, nullptr); }

void RemoveIfDead(const std::string& tcp_address) {
  if (std::string endpoint = EndpointOf(tcp_address); !endpoint.empty()) {
    ProbePath(endpoint.substr(6), nullptr, 0);
    ProbePath(endpoint.substr(6) + direct::kSuffix, nullptr, 0);
  }
}

void Sweep(const std::string& dir, const std::string& self, size_t samples, time_t stale_after_s) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> picked;
  std::minstd_rand rng(static_cast<unsigned>(getpid()) ^ static_cast<unsigned>(time(nullptr)));
  size_t seen = 0;
  while (dirent* e = readdir(d)) {
    std::string path = dir + "/" + e->d_name;
    if (e->d_name[0] == '.' || path == self) continue;
    ++seen;  // reservoir sampling: every entry has the same chance
    if (picked.size() < samples) {
      picked.push_back(path);
    } else if (size_t j = rng() % seen; j < samples) {
      picked[j] = path;
    }
  }
  closedir(d);
  for (const std::string& path : picked) ProbePath(path, nullptr, stale_after_s);
}

void RegisterOwn(const std::string& endpoint) {
  std::lock_guard<std::mutex> lock(g_own_mu);
  g_own->push_back(endpoint.substr(6));
}

void RemoveOne(const std::string& endpoint) {
  std::lock_guard<std::mutex> lock(g_own_mu);
  auto it = std::find(g_own->begin(), g_own->end(), endpoint.substr(6));
  if (it == g_own->end()) return;
  unlink(it->c_str());
  g_own->erase(it);
}

void RemoveOwn() {
  std::lock_guard<std::mutex> lock(g_own_mu);
  for (const std::string& path : *g_own) unlink(path.c_str());
  g_own->clear();
}

Peer Connect(zmq::socket_t& socket, const std::string& address) {
  Peer peer;
  if (std::string endpoint = ResolveStamped(address, &peer); !endpoint.empty()) {
    security::ConfigureLocalClient(socket);
    socket.connect(endpoint);
    return peer;
  }
  security::ConfigureClient(socket);
  socket.connect(address);
  return Peer{};
}

bool Replaced(const Peer& peer) { return LookAt(peer) == AtPath::kAnother; }

bool Ended(const Peer& peer) {
  AtPath now = LookAt(peer);
  return now == AtPath::kAnother || now == AtPath::kNothing;
}

bool PeerIsUser(const std::string& peer_address, uid_t uid) {
  // "<host>:<uid>:<gid>:<pid>": libzmq names a Unix-socket peer "localhost" (or nothing)
  // and appends its credentials; the host part holds no colon.
  std::vector<std::string> fields;
  size_t begin = 0;
  while (fields.size() < 5) {
    size_t colon = peer_address.find(':', begin);
    fields.push_back(peer_address.substr(begin, colon - begin));
    if (colon == std::string::npos) break;
    begin = colon + 1;
  }
  if (fields.size() != 4) return false;
  for (size_t i = 1; i < 4; ++i) {
    if (fields[i].empty() || fields[i].size() > 10 ||
        fields[i].find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
  }
  return std::stoull(fields[1]) == static_cast<unsigned long long>(uid);
}

}  // namespace orrery::transport::local
