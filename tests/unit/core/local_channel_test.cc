// The same-host channel (core/src/local_channel.h): an inbox also listens on a Unix socket
// in a folder only this user may enter; senders of this host and user reach it there, with
// the cluster's PLAIN secret when credentials are on; a wrong secret, a stale socket file,
// an unsafe folder and another user are refused or passed over to TCP.
#include "core/src/local_channel.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "core/internal/clock.h"
#include "core/internal/connect_probe.h"
#include "core/internal/security.h"
#include "core/internal/transport.h"
#include "tests/fakes/temp_dir.h"

namespace orrery::transport::local {
namespace {

// An inbox that records the peer address ZeroMQ saw for each message (":uid:gid:pid" over
// a Unix socket, "127.0.0.1" over TCP).
class RecordingInbox {
 public:
  RecordingInbox() {
    EXPECT_TRUE(inbox_.Bind("127.0.0.1").ok());
    inbox_.Start([this](Envelope& env) {
      std::string peer = PeerAddress(env.frame0);
      std::lock_guard<std::mutex> lock(mu_);
      peers_.push_back(peer);
      cv_.notify_all();
    });
  }
  ~RecordingInbox() { inbox_.Stop(); }
  Inbox& inbox() { return inbox_; }
  // The peer address of the n-th message (1-based), "" when it did not come within 20 s.
  std::string WaitForMessage(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(20), [&] { return peers_.size() >= n; })) {
      return "";
    }
    return peers_[n - 1];
  }

 private:
  Inbox inbox_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> peers_;
};

// Sets this process's credentials for a test and turns them off again after it.
class CredentialsGuard {
 public:
  explicit CredentialsGuard(const std::string& token) {
    EXPECT_TRUE(security::SetProcessCredentials(security::FromToken(token, "test")).ok());
  }
  ~CredentialsGuard() { security::SetProcessCredentials(security::Credentials{}).ok(); }
};

// Over a Unix socket, libzmq's peer address ends with this process's credentials.
std::string OwnPeerSuffix() {
  return ":" + std::to_string(geteuid()) + ":" + std::to_string(getegid()) + ":" +
         std::to_string(getpid());
}
bool FromThisProcess(const std::string& peer) {
  std::string suffix = OwnPeerSuffix();
  return peer.size() > suffix.size() &&
         peer.compare(peer.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TEST(LocalChannelTest, PeerAddressesNameTheUserExactly) {
  EXPECT_TRUE(PeerIsUser("localhost:0:0:123", 0));
  EXPECT_TRUE(PeerIsUser(":0:0:123", 0));
  EXPECT_TRUE(PeerIsUser("localhost:1000:1000:5", 1000));
  EXPECT_FALSE(PeerIsUser("localhost:1000:1000:5", 0));
  EXPECT_FALSE(PeerIsUser("localhost:10:0:5", 1));
  EXPECT_FALSE(PeerIsUser("127.0.0.1", 0));  // a TCP peer has no credentials
  EXPECT_FALSE(PeerIsUser("::1:0:0:5", 0));  // nor a colon in its host part here
  EXPECT_FALSE(PeerIsUser("", 0));
  EXPECT_FALSE(PeerIsUser(":", 0));
  EXPECT_FALSE(PeerIsUser("localhost::0:5", 0));
  EXPECT_FALSE(PeerIsUser("localhost:0x0:0:5", 0));
  EXPECT_FALSE(PeerIsUser("localhost:-0:0:5", 0));
  EXPECT_FALSE(PeerIsUser("localhost:99999999999999999999:0:1", 0));
  EXPECT_FALSE(PeerIsUser("localhost:0:0", 0));
  EXPECT_FALSE(PeerIsUser("localhost:0:0:1:2", 0));
}

class LocalDirTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(root_.empty()); }
  orrery::testing::TempDir tmp_{"orrery_local_channel_test"};
  const std::string& root_ = tmp_.path();
};

TEST_F(LocalDirTest, AFolderOfOwnAndMode0700IsMadeAndAccepted) {
  std::string dir = root_ + "/ipc";
  EXPECT_EQ(CheckDir(dir), "");
  struct stat st {};
  ASSERT_EQ(lstat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(CheckDir(dir), "") << "an existing safe folder is accepted again";
}

TEST_F(LocalDirTest, UnsafeFoldersAreRefusedSayingWhy) {
  std::string open_dir = root_ + "/open";
  ASSERT_EQ(mkdir(open_dir.c_str(), 0755), 0);
  ASSERT_EQ(chmod(open_dir.c_str(), 0755), 0);
  EXPECT_NE(CheckDir(open_dir).find("open to other users"), std::string::npos);

  std::string target = root_ + "/target";
  ASSERT_EQ(mkdir(target.c_str(), 0700), 0);
  std::string link = root_ + "/link";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  EXPECT_NE(CheckDir(link).find("not a folder"), std::string::npos);

  // A parent anyone may write in (without the sticky bit) could have the folder replaced.
  std::string shared = root_ + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(chmod(shared.c_str(), 0777), 0);
  EXPECT_NE(CheckDir(shared + "/ipc").find("may be written by other users"), std::string::npos);
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);  // as /tmp
  EXPECT_EQ(CheckDir(shared + "/ipc"), "");

  EXPECT_NE(CheckDir("ipc"), "");
  EXPECT_NE(CheckDir("relative/ipc"), "");
  EXPECT_NE(CheckDir("/ipc"), "");
}

// $ORRERY_TMPDIR, when set, holds the socket folder; otherwise a tmpfs /dev/shm does, where
// binding and removing socket files costs no disk inode.
TEST_F(LocalDirTest, TheFolderIsUnderOrreryTmpdirWhenSetElseOnTmpfs) {
  std::optional<std::string> old;
  if (const char* v = std::getenv("ORRERY_TMPDIR")) old = v;
  const char* channel = std::getenv("ORRERY_LOCAL_CHANNEL");
  if (channel != nullptr && std::string(channel) == "0") GTEST_SKIP() << "ORRERY_LOCAL_CHANNEL=0";
  const std::string uid = std::to_string(geteuid());

  setenv("ORRERY_TMPDIR", root_.c_str(), 1);
  std::string in_tmpdir = ComputeDir();
  unsetenv("ORRERY_TMPDIR");
  std::string unset = ComputeDir();
  if (old) setenv("ORRERY_TMPDIR", old->c_str(), 1);

  EXPECT_EQ(in_tmpdir.rfind(root_ + "/ipc-" + uid + "-", 0), 0u) << in_tmpdir;
  struct statfs fs {};
  bool tmpfs = statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC;
  const std::string expected = tmpfs ? "/dev/shm/orrery-ipc-" : "/tmp/orrery/ipc-";
  EXPECT_EQ(unset.rfind(expected + uid + "-", 0), 0u) << unset;
  struct stat st {};
  ASSERT_EQ(lstat(unset.c_str(), &st), 0) << unset;
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
}

// A process that moves its session root (a test fixture giving each cluster its own
// ORRERY_TMPDIR and removing it afterwards) binds and finds sockets in the new root's
// folder, not in the first one's, which is gone.
TEST(LocalChannelTest, TheSocketFolderFollowsTheSessionRoot) {
  const char* channel = std::getenv("ORRERY_LOCAL_CHANNEL");
  if (channel != nullptr && std::string(channel) == "0") GTEST_SKIP() << "ORRERY_LOCAL_CHANNEL=0";
  std::optional<std::string> old;
  if (const char* v = std::getenv("ORRERY_TMPDIR")) old = v;
  for (int round = 0; round < 2; ++round) {
    orrery::testing::TempDir root("orrery_local_root");
    ASSERT_FALSE(root.path().empty());
    setenv("ORRERY_TMPDIR", root.path().c_str(), 1);
    ASSERT_EQ(Dir().rfind(root.path() + "/ipc-", 0), 0u) << Dir() << " in round " << round;
    RecordingInbox target;
    ASSERT_EQ(target.inbox().local_endpoint().rfind("ipc://" + root.path() + "/", 0), 0u)
        << "round " << round << ": " << target.inbox().local_endpoint();
    ASSERT_TRUE(TrySend(target.inbox().address(), proto::MsgType::kPing, proto::PingMsg{}).ok());
    std::string peer = target.WaitForMessage(1);
    EXPECT_TRUE(FromThisProcess(peer))
        << "round " << round << ", not over the Unix socket: " << peer;
    CloseThreadSockets();
  }
  if (old) {
    setenv("ORRERY_TMPDIR", old->c_str(), 1);
  } else {
    unsetenv("ORRERY_TMPDIR");
  }
}

TEST(LocalChannelTest, AnInboxOfThisHostIsReachedOverItsUnixSocket) {
  if (Dir().empty()) GTEST_SKIP() << "no same-host channel here (ORRERY_LOCAL_CHANNEL=0?)";
  RecordingInbox target;
  const std::string& endpoint = target.inbox().local_endpoint();
  ASSERT_EQ(endpoint.rfind("ipc://" + Dir() + "/", 0), 0u) << endpoint;
  struct stat st {};
  ASSERT_EQ(lstat(endpoint.substr(6).c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(Resolve(target.inbox().address()), endpoint);

  ASSERT_TRUE(TrySend(target.inbox().address(), proto::MsgType::kPing, proto::PingMsg{}).ok());
  std::string peer = target.WaitForMessage(1);
  EXPECT_TRUE(FromThisProcess(peer)) << "not over the Unix socket: " << peer;
  EXPECT_TRUE(PeerIsUser(peer, geteuid()));
  CloseThreadSockets();
}

TEST(LocalChannelTest, WithCredentialsTheClusterSecretIsRequired) {
  if (Dir().empty()) GTEST_SKIP() << "no same-host channel here (ORRERY_LOCAL_CHANNEL=0?)";
  const std::string token = security::NewToken();
  CredentialsGuard cluster(token);
  RecordingInbox target;
  ASSERT_TRUE(TrySend(target.inbox().address(), proto::MsgType::kPing, proto::PingMsg{}).ok());
  std::string peer = target.WaitForMessage(1);
  EXPECT_TRUE(FromThisProcess(peer)) << "not over the Unix socket: " << peer;
  CloseThreadSockets();

  // A client holding another cluster's secret: the server refuses its handshake (the ZAP
  // handler answers 400), and nothing it sends is read.
  zmq::context_t ctx;
  zmq::socket_t stranger(ctx, zmq::socket_type::dealer);
  stranger.set(zmq::sockopt::linger, 0);
  ASSERT_TRUE(
      security::SetProcessCredentials(security::FromToken(security::NewToken(), "other")).ok());
  security::ConfigureLocalClient(stranger);
  ASSERT_TRUE(security::SetProcessCredentials(security::FromToken(token, "test")).ok());
  zmq::socket_t events(ctx, zmq::socket_type::pair);
  ASSERT_EQ(zmq_socket_monitor(stranger.handle(), "inproc://stranger-monitor",
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED),
            0);
  events.connect("inproc://stranger-monitor");
  events.set(zmq::sockopt::rcvtimeo, 20000);
  stranger.connect(target.inbox().local_endpoint());
  std::string frame = proto::EncodeFrame(proto::MsgType::kPing, proto::PingMsg{});
  (void)stranger.send(zmq::buffer(frame), zmq::send_flags::dontwait);
  zmq::message_t event, event_endpoint;
  ASSERT_TRUE(events.recv(event)) << "no handshake outcome within 20 s";
  ASSERT_TRUE(events.recv(event_endpoint));
  uint16_t id = 0;
  std::memcpy(&id, event.data(), sizeof(id));
  EXPECT_EQ(id, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
  zmq_socket_monitor(stranger.handle(), nullptr, 0);

  // The cluster's own secret still gets through, after the stranger's attempt.
  ASSERT_TRUE(TrySend(target.inbox().address(), proto::MsgType::kPing, proto::PingMsg{}).ok());
  EXPECT_NE(target.WaitForMessage(2), "");
  CloseThreadSockets();
}

// A Unix socket file at `path`: listening (a live process) or only bound (one that died).
int MakeSocketFile(const std::string& path, bool listening) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      (listening && listen(fd, 4) != 0)) {
    ADD_FAILURE() << "cannot make the socket file " << path << ": " << std::strerror(errno);
  }
  if (!listening && fd >= 0) {
    close(fd);
    // Made a minute ago: a younger file may be a process's between bind and listen.
    timespec old[2] = {{time(nullptr) - 60, 0}, {time(nullptr) - 60, 0}};
    utimensat(AT_FDCWD, path.c_str(), old, AT_SYMLINK_NOFOLLOW);
    return -1;
  }
  return fd;
}

TEST(LocalChannelTest, AStaleSocketFileIsPassedOverAndRemoved) {
  if (Dir().empty()) GTEST_SKIP() << "no same-host channel here (ORRERY_LOCAL_CHANNEL=0?)";
  // A socket file whose process is gone: bound, never listening. Port 2 of 127.0.0.2:
  // no inbox of this test advertises that address.
  std::string endpoint = EndpointFor("127.0.0.2", 2);
  ASSERT_FALSE(endpoint.empty());
  std::string path = endpoint.substr(6);
  unlink(path.c_str());
  // A fresh one is passed over but kept (its process may be about to listen)...
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
  EXPECT_EQ(Resolve("tcp://127.0.0.2:2"), "");
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << "a fresh socket file was removed";
  unlink(path.c_str());
  // ... an old one is removed.
  MakeSocketFile(path, false);
  EXPECT_EQ(Resolve("tcp://127.0.0.2:2"), "");
  EXPECT_NE(lstat(path.c_str(), &st), 0) << "the stale file was left";
  EXPECT_EQ(Resolve("tcp://127.0.0.2:2"), "");
  EXPECT_EQ(Resolve("not an address"), "");
  EXPECT_EQ(Resolve("tcp://127.0.0.1:"), "");
  EXPECT_EQ(Resolve("tcp://127.0.0.1:99999"), "");
}

TEST(LocalChannelTest, AProbeOfAProcessOfThisHostGoesToItsUnixSocketNotItsTcpPort) {
  if (Dir().empty()) GTEST_SKIP() << "no same-host channel here (ORRERY_LOCAL_CHANNEL=0?)";
  // A TCP port that never accepts: a connection made to it stays in its queue.
  int tcp = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(in);
  ASSERT_EQ(bind(tcp, reinterpret_cast<sockaddr*>(&in), sizeof(in)), 0);
  ASSERT_EQ(listen(tcp, 4), 0);
  ASSERT_EQ(getsockname(tcp, reinterpret_cast<sockaddr*>(&in), &len), 0);
  const int port = ntohs(in.sin_port);
  const std::string address = "tcp://127.0.0.1:" + std::to_string(port);
  const std::string path = EndpointFor("127.0.0.1", port).substr(6);
  unlink(path.c_str());
  int un = MakeSocketFile(path, true);

  EXPECT_EQ(ProbeAddress(address, 1000), ProbeOutcome::kListening);
  EXPECT_LT(accept(tcp, nullptr, nullptr), 0) << "the TCP port was probed";

  close(un);  // no Unix socket: the TCP port answers
  unlink(path.c_str());
  EXPECT_EQ(ProbeAddress(address, 1000), ProbeOutcome::kListening);
  int probe = accept(tcp, nullptr, nullptr);
  EXPECT_GE(probe, 0) << "the TCP port was not probed";
  if (probe >= 0) close(probe);
  close(tcp);
  EXPECT_EQ(ProbeAddress(address, 1000), ProbeOutcome::kRefused);
}

TEST(LocalChannelTest, AnAddressWhosePathWouldBeTooLongHasNone) {
  if (Dir().empty()) GTEST_SKIP() << "no same-host channel here (ORRERY_LOCAL_CHANNEL=0?)";
  EXPECT_NE(EndpointFor("255.255.255.255", 65535), "");
  EXPECT_EQ(EndpointFor(std::string(120, 'h'), 1), "");  // a Unix socket path holds 107
  EXPECT_EQ(Resolve("tcp://" + std::string(120, 'h') + ":1"), "");
}

TEST(LocalChannelTest, ADeadProcesssFileIsRemovedWhateverItsAgeAndALiveOneIsKept) {
  if (Dir().empty()) GTEST_SKIP() << "no same-host channel here (ORRERY_LOCAL_CHANNEL=0?)";
  std::string path = EndpointFor("127.0.0.2", 3).substr(6);
  unlink(path.c_str());
  int fd = MakeSocketFile(path, true);
  RemoveIfDead("tcp://127.0.0.2:3");
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << "a listening socket's file was removed";
  close(fd);  // now nobody listens: a process that was just killed
  RemoveIfDead("tcp://127.0.0.2:3");
  EXPECT_NE(lstat(path.c_str(), &st), 0) << "a dead process's fresh file was left";
  RemoveIfDead("not an address");  // nothing to do, and no harm
}

TEST(LocalChannelTest, AStaleFileReplacedAfterItWasSeenIsKept) {
  if (Dir().empty()) GTEST_SKIP() << "no same-host channel here (ORRERY_LOCAL_CHANNEL=0?)";
  std::string path = EndpointFor("127.0.0.2", 5).substr(6);
  unlink(path.c_str());
  MakeSocketFile(path, false);  // a dead process's, a minute old
  struct stat seen {};
  ASSERT_EQ(lstat(path.c_str(), &seen), 0);
  // A restarting process removes it and binds its own, not yet listening.
  unlink(path.c_str());
  int fresh = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(bind(fresh, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  RemoveIfStillStale(path, seen, 0);
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << "the new process's file was removed";
  // The file seen, still there and old enough, is removed.
  ASSERT_EQ(lstat(path.c_str(), &seen), 0);
  RemoveIfStillStale(path, seen, 60);
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << "a file younger than a minute was removed";
  RemoveIfStillStale(path, seen, 0);
  EXPECT_NE(lstat(path.c_str(), &st), 0) << "the stale file was left";
  close(fresh);
}

TEST(LocalChannelTest, AFileBoundAnewAtThePathIsToldFromTheOneConnectedTo) {
  if (Dir().empty()) GTEST_SKIP() << "no same-host channel here (ORRERY_LOCAL_CHANNEL=0?)";
  std::string path = EndpointFor("127.0.0.2", 4).substr(6);
  unlink(path.c_str());
  int first = MakeSocketFile(path, true);
  Peer peer;
  ASSERT_TRUE(ProbePath(path, &peer));
  EXPECT_EQ(peer.path, path);
  EXPECT_FALSE(Replaced(peer)) << "the same file";
  close(first);
  unlink(path.c_str());
  EXPECT_FALSE(Replaced(peer)) << "no file: nothing to connect to instead";
  int second = MakeSocketFile(path, true);
  EXPECT_TRUE(Replaced(peer)) << "another process bound the path";
  EXPECT_FALSE(Replaced(Peer{})) << "a connection over TCP";
  close(second);
  unlink(path.c_str());
}

// The kernel gives a port out again as soon as its process is gone when no TCP connection
// was made to it (none lingers in TIME_WAIT): a sender that still holds a socket to the
// former inbox reaches the next one on that port (at once: the sender sees the new file,
// AFileBoundAnewAtThePathIsToldFromTheOneConnectedTo), and the later inbox does not get
// what was sent to the former.
TEST(LocalChannelTest, ALaterInboxAtTheSameAddressGetsOnlyWhatWasSentToIt) {
  if (Dir().empty()) GTEST_SKIP() << "no same-host channel here (ORRERY_LOCAL_CHANNEL=0?)";
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<int, proto::MsgType>> got;  // (which inbox, type)
  auto record = [&](int which) {
    return [&, which](Envelope& env) {
      std::lock_guard<std::mutex> lock(mu);
      got.emplace_back(which, env.type);
      cv.notify_all();
    };
  };
  auto wait_for = [&](size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(20), [&] { return got.size() >= n; });
  };
  auto former = std::make_unique<Inbox>();
  ASSERT_TRUE(former->Bind("127.0.0.1").ok());
  former->Start(record(1));
  const std::string address = former->address();
  const int port = former->port();
  ASSERT_TRUE(TrySend(address, proto::MsgType::kPing, proto::PingMsg{}).ok());
  ASSERT_TRUE(wait_for(1));
  former->Stop();
  former.reset();
  // To the process that ended: it waits in the socket for a peer that will not come back.
  ASSERT_TRUE(TrySend(address, proto::MsgType::kPing, proto::PingMsg{}).ok());
  // ZeroMQ closes the former's TCP listener on its own thread, a little after: bind the
  // port again until that is done (or another process took the port).
  std::unique_ptr<Inbox> later;
  for (double t0 = MonotonicSeconds(); !later && MonotonicSeconds() - t0 < 10;) {
    later = std::make_unique<Inbox>();
    if (!later->Bind("127.0.0.1", port).ok()) later.reset();
  }
  if (!later) GTEST_SKIP() << "port " << port << " was not free again within 10 s";
  later->Start(record(2));
  // The socket looks at its peer's file at most once a millisecond.
  for (double t0 = MonotonicSeconds(); MonotonicSeconds() - t0 < 0.002;) {
  }
  ASSERT_TRUE(TrySend(address, proto::MsgType::kExit, proto::PingMsg{}).ok());
  ASSERT_TRUE(wait_for(2)) << "the later inbox got nothing within 20 s";
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(got[1], std::make_pair(2, proto::MsgType::kExit))
        << "the later inbox got the message sent to the former first";
  }
  later->Stop();
  CloseThreadSockets();
}

// A socket that gives way (the thread's cap) while it holds a message for a process of this
// host that has ended, its socket file gone, closes at once: nothing can take the message.
// Before, it drained outside the cap for drain_s (30 s), a descriptor each: a head that
// outlived 500 short-lived drivers held up to 84 descriptors past its cap.
TEST(LocalChannelTest, ASocketHoldingMessagesForAnEndedProcessDoesNotDrain) {
  if (Dir().empty()) GTEST_SKIP() << "no same-host channel here (ORRERY_LOCAL_CHANNEL=0?)";
  const SendLimits saved = GetSendLimits();
  SendLimits limits = saved;
  limits.max_sockets_per_thread = 1;
  SetSendLimits(limits);
  std::thread([] {
    auto ended = std::make_unique<RecordingInbox>();
    const std::string address = ended->inbox().address();
    ASSERT_TRUE(TrySend(address, proto::MsgType::kPing, proto::PingMsg{}).ok());
    ASSERT_FALSE(ended->WaitForMessage(1).empty());
    ended.reset();  // its socket file goes with it
    ASSERT_TRUE(TrySend(address, proto::MsgType::kPing, proto::PingMsg{}).ok());  // held
    RecordingInbox other;
    ASSERT_TRUE(TrySend(other.inbox().address(), proto::MsgType::kPing, proto::PingMsg{}).ok());
    EXPECT_EQ(ThreadSocketCount(), 1u);
    EXPECT_EQ(ThreadDrainingCount(), 0u) << "the socket to the ended process drains";
    EXPECT_FALSE(other.WaitForMessage(1).empty());
    CloseThreadSockets();
  }).join();
  SetSendLimits(saved);
}

TEST_F(LocalDirTest, ASweepRemovesTheFilesOfGoneProcessesAndKeepsTheLiveOnes) {
  int live = MakeSocketFile(root_ + "/127.0.0.1_1000", true);
  for (int i = 0; i < 3; ++i) MakeSocketFile(root_ + "/127.0.0.1_" + std::to_string(i), false);
  MakeSocketFile(root_ + "/own", false);  // `self`: never probed
  Sweep(root_, root_ + "/own", 8);
  struct stat st {};
  EXPECT_EQ(lstat((root_ + "/127.0.0.1_1000").c_str(), &st), 0) << "a live socket was removed";
  EXPECT_EQ(lstat((root_ + "/own").c_str(), &st), 0) << "the sweeper's own file was probed";
  for (int i = 0; i < 3; ++i) {
    EXPECT_NE(lstat((root_ + "/127.0.0.1_" + std::to_string(i)).c_str(), &st), 0)
        << "a stale socket file was left";
  }
  // A sample of one removes at most one.
  for (int i = 0; i < 3; ++i) MakeSocketFile(root_ + "/127.0.0.1_" + std::to_string(i), false);
  Sweep(root_, "", 1);
  int left = 0;
  for (int i = 0; i < 3; ++i)
    left += lstat((root_ + "/127.0.0.1_" + std::to_string(i)).c_str(), &st) == 0;
  EXPECT_GE(left, 2);
  close(live);
}

TEST(LocalChannelTest, AProcessEndingWithExitRemovesItsSocketFilesFirst) {
  if (Dir().empty()) GTEST_SKIP() << "no same-host channel here (ORRERY_LOCAL_CHANNEL=0?)";
  auto* inbox = new Inbox();  // as a worker's: never destroyed
  ASSERT_TRUE(inbox->Bind("127.0.0.1").ok());
  std::string path = inbox->local_endpoint().substr(6);
  struct stat st {};
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  RemoveLocalSockets();
  EXPECT_NE(lstat(path.c_str(), &st), 0);
  delete inbox;  // (ZeroMQ's own removal finds nothing left)
}

TEST(LocalChannelTest, AnInboxRemovesItsSocketFileWhenDestroyed) {
  if (Dir().empty()) GTEST_SKIP() << "no same-host channel here (ORRERY_LOCAL_CHANNEL=0?)";
  std::string path;
  {
    Inbox inbox;
    ASSERT_TRUE(inbox.Bind("127.0.0.1").ok());
    path = inbox.local_endpoint().substr(6);
    struct stat st {};
    ASSERT_EQ(lstat(path.c_str(), &st), 0);
  }
  // Gone when the destructor returns, not once ZeroMQ's I/O thread gets to it (a process
  // that exits right after its Shutdown left its files behind).
  struct stat st {};
  EXPECT_NE(lstat(path.c_str(), &st), 0) << path;
  RemoveLocalSockets();  // and no longer this process's to remove
  EXPECT_NE(lstat(path.c_str(), &st), 0) << path;
}

TEST(LocalChannelTest, AnotherUserCannotConnect) {
  if (Dir().empty()) GTEST_SKIP() << "no same-host channel here (ORRERY_LOCAL_CHANNEL=0?)";
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a process as another user";
  RecordingInbox target;
  std::string path = target.inbox().local_endpoint().substr(6);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    _exit(rc != 0 && errno == EACCES ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: could not become nobody; 1: nobody could connect";
}

}  // namespace
}  // namespace orrery::transport::local
