// The direct same-host path (core/src/direct_channel.h): a thread's Order::kAny messages to
// an inbox of this host go over its SOCK_SEQPACKET socket once the inbox admitted the
// thread's connection; larger ones, ordered ones and those of a process with the path off go
// through ZeroMQ; a peer that does not send this cluster's hello, or breaks the framing, is
// hung up on and the inbox goes on serving.
#include "core/src/direct_channel.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/internal/protocol.h"
#include "core/internal/security.h"
#include "core/internal/transport.h"

namespace orrery::transport::direct {
namespace {

using namespace std::chrono_literals;

// What one message looked like on arrival.
struct Seen {
  bool direct = false;  // no ZeroMQ identity: it came over the direct path
  std::string meta;
  std::string payload;
  bool has_payload = false;
};

class RecordingInbox {
 public:
  RecordingInbox() {
    EXPECT_TRUE(inbox_.Bind("127.0.0.1").ok());
    inbox_.Start([this](Envelope& env) {
      std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back(Seen{env.identity.empty(), std::string(env.meta()), env.PayloadString(),
                           env.has_payload});
      cv_.notify_all();
    });
  }
  ~RecordingInbox() { inbox_.Stop(); }
  Inbox& inbox() { return inbox_; }
  std::string DirectPath() const {
    return inbox_.local_endpoint().empty() ? "" : inbox_.local_endpoint().substr(6) + kSuffix;
  }
  // The first n messages once they came (within 20 s); fewer when they did not.
  std::vector<Seen> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, 20s, [&] { return seen_.size() >= n; });
    return seen_;
  }

 private:
  Inbox inbox_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Seen> seen_;
};

std::string Frame(const std::string& text) {
  return proto::EncodeFrame(proto::MsgType::kPing, proto::PingMsg{1, text});
}
std::string MetaOf(const std::string& text) {
  std::string f = Frame(text);
  return f.substr(proto::kHeaderSize);
}

// Sends kAny pings until one arrives over the direct path (the connection's admission is
// answered by the inbox's loop); returns how many were sent, 0 when none came direct in 20 s.
size_t SendUntilDirect(RecordingInbox& r, const std::string& address) {
  auto deadline = std::chrono::steady_clock::now() + 20s;
  for (size_t sent = 1; std::chrono::steady_clock::now() < deadline; ++sent) {
    EXPECT_TRUE(
        TrySendFrames(address, Frame("p" + std::to_string(sent)), nullptr, Order::kAny).ok());
    std::vector<Seen> seen = r.WaitFor(sent);
    if (seen.size() < sent) return 0;
    if (seen.back().direct) return sent;
  }
  return 0;
}

// A raw client of a direct socket, for hostile input.
class RawClient {
 public:
  explicit RawClient(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval tv{20, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawClient() { close(fd_); }
  bool connected() const { return connected_; }
  bool SendRaw(const std::string& bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size());
  }
  static std::string Message(const std::string& frame0, const std::string* payload) {
    std::string m(5, '\0');
    for (int i = 0; i < 4; ++i) m[size_t(i)] = char((frame0.size() >> (8 * i)) & 0xff);
    m[4] = payload ? 1 : 0;
    return m + frame0 + (payload ? *payload : "");
  }
  // The listener's answer: 'A' admitted, 0 when it hung up (or nothing within 20 s).
  char Answer() {
    char c = 0;
    return recv(fd_, &c, 1, 0) == 1 ? c : 0;
  }
  // Whether the listener hung up within 20 s (recv sees the end).
  bool HungUp() {
    char c;
    return recv(fd_, &c, 1, 0) == 0;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

TEST(DirectChannelTest, UnorderedMessagesTakeTheDirectPathOnceAdmittedAndNoneIsLost) {
  RecordingInbox r;
  if (r.DirectPath().empty()) GTEST_SKIP() << "no same-host channel on this machine";
  struct stat st {};
  ASSERT_EQ(lstat(r.DirectPath().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  size_t sent = SendUntilDirect(r, r.inbox().address());
  ASSERT_GT(sent, 0u) << "no message came over the direct path";
  // From now on, small kAny messages keep coming direct, payloads and all (each awaited
  // before the next: a full connection would send it through ZeroMQ).
  std::string payload(1000, 'x');
  for (size_t i = 0; i < 200; ++i) {
    ASSERT_TRUE(
        TrySendFrames(r.inbox().address(), Frame("d" + std::to_string(i)), &payload, Order::kAny)
            .ok());
    std::vector<Seen> seen = r.WaitFor(sent + i + 1);
    ASSERT_EQ(seen.size(), sent + i + 1);
    const Seen& s = seen.back();
    EXPECT_TRUE(s.direct);
    EXPECT_EQ(s.meta, MetaOf("d" + std::to_string(i)));
    EXPECT_TRUE(s.has_payload);
    EXPECT_EQ(s.payload, payload);
  }
  // A burst faster than the inbox reads: every message comes, some through ZeroMQ once the
  // connection is full.
  for (size_t i = 0; i < 5000; ++i) {
    ASSERT_TRUE(TrySendFrames(r.inbox().address(), Frame("b"), &payload, Order::kAny).ok());
  }
  EXPECT_EQ(r.WaitFor(sent + 5200).size(), sent + 5200);
}

TEST(DirectChannelTest, LargeAndOrderedMessagesGoThroughZeroMQ) {
  RecordingInbox r;
  if (r.DirectPath().empty()) GTEST_SKIP() << "no same-host channel on this machine";
  size_t sent = SendUntilDirect(r, r.inbox().address());
  ASSERT_GT(sent, 0u);
  uint64_t ordered = ThreadOrderedSends();
  std::string large(kMaxMessageBytes + 1, 'L');
  ASSERT_TRUE(TrySendFrames(r.inbox().address(), Frame("large"), &large, Order::kAny).ok());
  EXPECT_EQ(ThreadOrderedSends(), ordered) << "an unordered message counts as none";
  ASSERT_TRUE(TrySendFrames(r.inbox().address(), Frame("kept"), nullptr).ok());
  EXPECT_EQ(ThreadOrderedSends(), ordered + 1);
  std::vector<Seen> seen = r.WaitFor(sent + 2);
  ASSERT_EQ(seen.size(), sent + 2);
  for (size_t i = sent; i < sent + 2; ++i) {
    EXPECT_FALSE(seen[i].direct) << "message " << i;
    if (seen[i].has_payload) {
      EXPECT_EQ(seen[i].payload, large);
    }
  }
}

TEST(DirectChannelTest, TurnedOffAnInboxHasNoDirectSocket) {
  setenv("ORRERY_DIRECT_CHANNEL", "0", 1);
  RecordingInbox r;
  unsetenv("ORRERY_DIRECT_CHANNEL");
  if (r.inbox().local_endpoint().empty()) GTEST_SKIP() << "no same-host channel here";
  struct stat st {};
  EXPECT_NE(lstat(r.DirectPath().c_str(), &st), 0);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(TrySendFrames(r.inbox().address(), Frame("z"), nullptr, Order::kAny).ok());
  }
  std::vector<Seen> seen = r.WaitFor(20);
  ASSERT_EQ(seen.size(), 20u);
  for (const Seen& s : seen) EXPECT_FALSE(s.direct);
}

TEST(DirectChannelTest, TheSocketFileGoesWithItsInbox) {
  std::string path;
  {
    RecordingInbox r;
    path = r.DirectPath();
    if (path.empty()) GTEST_SKIP() << "no same-host channel here";
  }
  struct stat st {};
  EXPECT_NE(lstat(path.c_str(), &st), 0);
}

TEST(DirectChannelTest, APeerWithoutTheClustersHelloIsHungUpOn) {
  ASSERT_TRUE(security::SetProcessCredentials(security::FromToken(std::string(64, 'a'), "t")).ok());
  {
    RecordingInbox r;
    if (r.DirectPath().empty()) GTEST_SKIP() << "no same-host channel here";
    // Another cluster's secret.
    std::string other = "orrery direct " + std::string(1, char('0' + proto::kProtocolVersion)) +
                        " " + security::LocalSecret(security::FromToken(std::string(64, 'b'), "t"));
    ASSERT_NE(other, Hello());
    std::vector<std::string> hellos = {
        RawClient::Message(other, nullptr),
        RawClient::Message("", nullptr),
        RawClient::Message(Hello(), &other),  // a payload where none belongs
        RawClient::Message(Hello() + "x", nullptr),
        "\x01",
        std::string(kMaxMessageBytes + 100, 'h'),
        // This cluster's secret, another protocol version.
        RawClient::Message("orrery direct " +
                               std::string(1, char('0' + proto::kProtocolVersion + 1)) + " " +
                               security::LocalSecret(security::ProcessCredentials()),
                           nullptr),
    };
    for (size_t i = 0; i < hellos.size(); ++i) {
      RawClient c(r.DirectPath());
      ASSERT_TRUE(c.connected());
      ASSERT_TRUE(c.SendRaw(hellos[i]) || hellos[i].size() > kMaxMessageBytes) << i;
      std::string frame = Frame("smuggled");
      c.SendRaw(RawClient::Message(frame, nullptr));
      EXPECT_EQ(c.Answer(), 0) << "hello " << i << " was admitted";
    }
    // The inbox heard none of it, and serves on.
    ASSERT_TRUE(TrySendFrames(r.inbox().address(), Frame("after"), nullptr).ok());
    std::vector<Seen> seen = r.WaitFor(1);
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].meta, MetaOf("after"));
  }
  ASSERT_TRUE(security::SetProcessCredentials(security::Credentials{}).ok());
}

TEST(DirectChannelTest, AnAdmittedPeerThatBreaksTheFramingIsHungUpOnAndTheInboxServesOn) {
  RecordingInbox r;
  if (r.DirectPath().empty()) GTEST_SKIP() << "no same-host channel here";
  std::string frame = Frame("ok");
  std::vector<std::string> broken = {
      std::string("\x10\x00\x00\x00\x00", 5) + "short",  // frame 0 longer than sent
      std::string("\x02\x00\x00\x00\x07", 5) + "abcd",   // a flag that is neither 0 nor 1
      std::string("\x02\x00\x00", 3),                    // no whole header
      std::string("\xff\xff\xff\xff\x01", 5) + "x",      // a length past the message
      std::string("\x02\x00\x00\x00\x00", 5) + "abc",    // bytes after frame 0, no payload
      std::string(kMaxMessageBytes + 64, 'z'),           // more than any sender sends
  };
  size_t good = 0;
  for (size_t i = 0; i < broken.size(); ++i) {
    RawClient c(r.DirectPath());
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.SendRaw(RawClient::Message(Hello(), nullptr)));
    ASSERT_EQ(c.Answer(), 'A') << i;
    ASSERT_TRUE(c.SendRaw(RawClient::Message(frame, nullptr)));  // a good one first: handled
    ++good;
    c.SendRaw(broken[i]);
    EXPECT_TRUE(c.HungUp()) << "message " << i;
  }
  // A header that is not Orrery's is dropped without hanging up.
  {
    RawClient c(r.DirectPath());
    ASSERT_TRUE(c.SendRaw(RawClient::Message(Hello(), nullptr)));
    ASSERT_EQ(c.Answer(), 'A');
    ASSERT_TRUE(c.SendRaw(RawClient::Message("XYZW", nullptr)));
    ASSERT_TRUE(c.SendRaw(RawClient::Message(frame, nullptr)));
    ++good;
  }
  std::vector<Seen> seen = r.WaitFor(good);
  ASSERT_EQ(seen.size(), good);
  for (const Seen& s : seen) {
    EXPECT_TRUE(s.direct);
    EXPECT_EQ(s.meta, MetaOf("ok"));
  }
}

TEST(DirectChannelTest, PastItsConnectionsAListenerRefusesNewOnesAndTheirSendersUseZeroMQ) {
  RecordingInbox r;
  if (r.DirectPath().empty()) GTEST_SKIP() << "no same-host channel here";
  // Admitted one by one until one is refused: at kMaxConnections at most (fewer where the
  // descriptor limit is low).
  std::vector<std::unique_ptr<RawClient>> held;
  bool refused = false;
  for (size_t i = 0; i <= kMaxConnections && !refused; ++i) {
    held.push_back(std::make_unique<RawClient>(r.DirectPath()));
    if (!held.back()->connected()) break;  // the backlog is full: refused too
    held.back()->SendRaw(RawClient::Message(Hello(), nullptr));
    refused = held.back()->Answer() != 'A';
  }
  EXPECT_TRUE(refused) << "admitted " << held.size() << " connections";
  EXPECT_GT(held.size(), 1u);
  // A sender of this process is refused too, and its messages go through ZeroMQ.
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(TrySendFrames(r.inbox().address(), Frame("z"), nullptr, Order::kAny).ok());
  }
  std::vector<Seen> seen = r.WaitFor(20);
  ASSERT_EQ(seen.size(), 20u);
  for (const Seen& s : seen) EXPECT_FALSE(s.direct);
}

}  // namespace
}  // namespace orrery::transport::direct
