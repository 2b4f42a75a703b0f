// The transport's own bounds (core/internal/transport.h): an inbox loop survives whatever its
// tick, posted functions and handlers throw; a thread's sockets and the bytes queued for
// peers that do not read are capped; request ids start at a random point per process.
// Everything talks over loopback between threads of this test; "dead" peers are ports
// nobody listens on.
#include "core/internal/transport.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <zmq_addon.hpp>

#include "orrery/version.h"
#include "tests/fakes/silent_listener.h"

namespace orrery::transport {
namespace {

// Counts events and wakes a waiter; waits have a deadline, never a sleep.
class Events {
 public:
  void Add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_[what];
    cv_.notify_all();
  }
  bool WaitFor(const std::string& what, int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return counts_[what] >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, int> counts_;
};

// Addresses where nothing listens (connects are refused; what is sent there queues).
std::string DeadAddress(int i) { return "tcp://127.0.0.1:" + std::to_string(1 + i); }

class LimitsGuard {
 public:
  LimitsGuard() : saved_(GetSendLimits()) {}
  ~LimitsGuard() { SetSendLimits(saved_); }

 private:
  SendLimits saved_;
};

TEST(TransportTest, InboxLoopSurvivesThrowingTickPostedFunctionAndHandler) {
  Events events;
  Inbox inbox;
  ASSERT_TRUE(inbox.Bind("127.0.0.1").ok());
  inbox.SetTick(1, [&] {
    events.Add("tick");
    throw std::runtime_error("tick failed");
  });
  inbox.Start([&](Envelope& env) {
    events.Add(proto::TypeName(env.type));
    throw std::logic_error("handler failed");
  });
  ASSERT_TRUE(events.WaitFor("tick", 3)) << "the tick should keep running after it threw";
  inbox.Post([] { throw 42; });  // not even a std::exception
  inbox.Post([&] { events.Add("posted"); });
  ASSERT_TRUE(events.WaitFor("posted", 1)) << "posted work after a throwing one should run";
  std::thread sender([&] {
    for (int i = 0; i < 2; ++i) Send(inbox.address(), proto::MsgType::kPing, proto::PingMsg{});
    CloseThreadSockets();
  });
  sender.join();
  EXPECT_TRUE(events.WaitFor("Ping", 2)) << "the handler should be called again after it threw";
  EXPECT_TRUE(events.WaitFor("tick", 6));
  inbox.Stop();
}

TEST(TransportTest, ThreadKeepsAtMostMaxSocketsAndClosesIdleOnes) {
  LimitsGuard guard;
  SendLimits limits = GetSendLimits();
  limits.max_sockets_per_thread = 8;
  limits.drain_s = 0;  // sockets that give way close at once (draining has tests below)
  SetSendLimits(limits);
  std::thread([&] {
    for (int i = 0; i < 100; ++i) SendFrames(DeadAddress(i), "x", nullptr);
    EXPECT_EQ(ThreadSocketCount(), 8u);
    EXPECT_EQ(ThreadDrainingCount(), 0u);
    SendLimits idle = limits;
    idle.idle_close_s = 0;  // everything is idle now
    SetSendLimits(idle);
    SweepThreadSockets();
    EXPECT_EQ(ThreadSocketCount(), 0u);
    CloseThreadSockets();
  }).join();
}

// An endpoint with nothing listening on it yet (an IPC path, so that no port can be taken
// meanwhile).
std::string FreeAddress() {
  static int n = 0;
  return "ipc:///tmp/orrery-transport-test-" + std::to_string(getpid()) + "-" + std::to_string(++n);
}

// Calls SweepThreadSockets until `done` holds, for at most 10 s.
bool SweepUntil(const std::function<bool()>& done) {
  for (int i = 0; i < 1000; ++i) {
    SweepThreadSockets();
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// A socket that must give way while what it holds waits for its peer (a peer still
// starting, a slow CURVE handshake) drains outside the cap and delivers once the peer is
// there. A plain close lost it after its linger (2 s): the node's Assign to one of 2,000
// starting workers.
TEST(TransportTest, ASocketThatGivesWayDeliversWhatItHolds) {
  LimitsGuard guard;
  SendLimits limits = GetSendLimits();
  limits.max_sockets_per_thread = 1;
  SetSendLimits(limits);
  const std::string late_peer = FreeAddress();
  std::thread([&] {
    SendFrames(late_peer, "hello", nullptr);   // queued: nothing listens there yet
    SendFrames(DeadAddress(0), "x", nullptr);  // takes the one place
    EXPECT_EQ(ThreadSocketCount(), 1u);
    EXPECT_EQ(ThreadDrainingCount(), 1u) << "the socket holding 'hello' should drain, not close";
    zmq::socket_t peer(Context(), zmq::socket_type::router);
    peer.set(zmq::sockopt::linger, 0);
    peer.set(zmq::sockopt::rcvtimeo, 10000);
    peer.bind(late_peer);
    std::vector<zmq::message_t> frames;
    ASSERT_TRUE(zmq::recv_multipart(peer, std::back_inserter(frames)));
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[1].to_string(), "hello");
    // Delivered, the draining socket closes.
    EXPECT_TRUE(SweepUntil([] { return ThreadDrainingCount() == 0; }));
    CloseThreadSockets();
    peer.close();
    ::unlink(late_peer.substr(std::string("ipc://").size()).c_str());
  }).join();
}

// What a draining socket cannot deliver within drain_s is dropped and the socket closed;
// a send to a peer whose socket is draining takes that socket back (a new socket could
// overtake what it holds).
TEST(TransportTest, DrainingSocketsCloseAfterTheirDeadlineAndComeBackWhenUsed) {
  LimitsGuard guard;
  SendLimits limits = GetSendLimits();
  limits.max_sockets_per_thread = 1;
  limits.drain_s = 0.2;
  SetSendLimits(limits);
  std::thread([&] {
    SendFrames(DeadAddress(1), "x", nullptr);
    SendFrames(DeadAddress(2), "x", nullptr);  // 1 drains
    SendFrames(DeadAddress(1), "x", nullptr);  // 1 is back in use, 2 drains
    EXPECT_EQ(ThreadSocketCount(), 1u);
    EXPECT_EQ(ThreadDrainingCount(), 1u) << "the socket to 1 should have been taken back";
    EXPECT_TRUE(SweepUntil([] { return ThreadDrainingCount() == 0; }))
        << "a socket to a dead peer should stop draining after drain_s";
    // At most max_draining_per_thread drain; the oldest gives way.
    SendLimits few = limits;
    few.drain_s = 60;
    few.max_draining_per_thread = 3;
    SetSendLimits(few);
    for (int i = 3; i < 20; ++i) SendFrames(DeadAddress(i), "x", nullptr);
    EXPECT_EQ(ThreadDrainingCount(), 3u);
    CloseThreadSockets();
    EXPECT_EQ(ThreadDrainingCount(), 0u);
  }).join();
}

// A draining socket whose peer still listens (a process swamped by a storm of handshakes
// on a busy machine: its kernel accepts the connection, its handshake does not finish) is
// not dropped at drain_s: it waits while probes find the peer listening, up to drain_max_s.
// 2,000 workers created at once beside a CPU burner lost their first message to the driver
// this way.
TEST(TransportTest, ADrainingSocketWhosePeerStillListensWaitsUpToTheLongestWait) {
  LimitsGuard guard;
  SendLimits limits = GetSendLimits();
  limits.max_sockets_per_thread = 1;
  limits.drain_s = 0.2;
  limits.drain_max_s = 3;
  SetSendLimits(limits);
  orrery::testing::SilentListener listener;  // listens, never speaks: no handshake finishes
  const std::string swamped = listener.address();
  ASSERT_FALSE(swamped.empty()) << "no loopback port could listen";
  std::thread([&] {
    SendFrames(swamped, "hello", nullptr);
    SendFrames(DeadAddress(0), "x", nullptr);  // takes the one place: `swamped` drains
    ASSERT_EQ(ThreadDrainingCount(), 1u);
    auto gave_way = std::chrono::steady_clock::now();
    // Five times drain_s: still draining, its peer listening.
    SweepUntil([&] {
      return ThreadDrainingCount() == 0 ||
             std::chrono::steady_clock::now() - gave_way > std::chrono::seconds(1);
    });
    EXPECT_EQ(ThreadDrainingCount(), 1u) << "dropped while its peer still listened";
    EXPECT_TRUE(SweepUntil([] { return ThreadDrainingCount() == 0; })) << "kept past drain_max_s";
    CloseThreadSockets();
  }).join();
}

TEST(TransportTest, BytesQueuedForAPeerThatDoesNotReadAreCapped) {
  LimitsGuard guard;
  SendLimits limits = GetSendLimits();
  limits.peer_bytes = 1 << 20;
  limits.total_bytes = 3 << 20;
  SetSendLimits(limits);
  std::thread([&] {
    const std::string payload(256 << 10, 'p');
    int sent = 0;
    Status last = Status::Ok();
    for (int i = 0; i < 100 && last.ok(); ++i) {
      last = TrySendFrames(DeadAddress(0), "frame", &payload);
      sent += last.ok();
    }
    EXPECT_FALSE(last.ok()) << "100 sends of 256 KiB to a dead port should not all queue";
    EXPECT_EQ(last.code(), StatusCode::kUnavailable);
    EXPECT_NE(last.message().find("send queue"), std::string::npos) << last.message();
    EXPECT_LE(sent, 4);
    // A message larger than the cap goes when nothing is queued for its peer...
    const std::string big(2 << 20, 'b');
    EXPECT_TRUE(TrySendFrames(DeadAddress(1), "frame", &big).ok());
    // ...but not past the process's total.
    Status over = Status::Ok();
    for (int i = 2; i < 10 && over.ok(); ++i) over = TrySendFrames(DeadAddress(i), "frame", &big);
    EXPECT_FALSE(over.ok());
    EXPECT_LE(QueuedBytes(), limits.total_bytes + int64_t(big.size()) + 4096);
    CloseThreadSockets();
  }).join();
}

// Sends `frame0` to `address` every 10 ms until a send fails (the peer's version refusal
// came back on the connection) or 20 s pass; returns the failure.
Status SendUntilRefused(const std::string& address, const std::string& frame0) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  Status last = Status::Ok();
  while (last.ok() && std::chrono::steady_clock::now() < deadline) {
    last = TrySendFrames(address, frame0, nullptr);
    if (last.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return last;
}

// A frame of another protocol version never reaches the handler: the inbox answers with the
// version refusal, which the sender's transport reads and fails its sends with, naming both.
TEST(TransportTest, AnInboxRefusesAnotherProtocolVersionAndTheSenderSeesBothVersions) {
  std::atomic<int> handled{0};
  Inbox inbox;
  ASSERT_TRUE(inbox.Bind("127.0.0.1").ok());
  inbox.Start([&](Envelope&) {
    ++handled;
    return Status::Ok();
  });
  std::string frame{char(proto::kMagic0), char(proto::kMagic1), char(proto::kProtocolVersion + 1),
                    char(proto::MsgType::kPing)};
  std::thread([&] {
    Status refused = SendUntilRefused(inbox.address(), frame);
    EXPECT_EQ(refused.code(), StatusCode::kIncompatible) << refused.ToString();
    EXPECT_NE(refused.message().find("the peer at " + inbox.address() + " runs orrery " +
                                     orrery::Version()),
              std::string::npos)
        << refused.message();
    EXPECT_NE(refused.message().find(orrery::VersionLine()), std::string::npos);
    // For good, on that connection.
    EXPECT_EQ(TrySendFrames(inbox.address(), frame, nullptr).code(), StatusCode::kIncompatible);
    CloseThreadSockets();
  }).join();
  inbox.Stop();
  // The refusal came in place of the handler's call, never after it.
  EXPECT_EQ(handled.load(), 0);
}

// A peer of another version (9, "orrery 9.0.0") answers with its refusal: this process's
// sends to it fail with both versions named.
TEST(TransportTest, ARefusalFromAPeerOfAnotherVersionFailsTheSendsWithBothVersions) {
  const std::string address = FreeAddress();
  zmq::socket_t peer(Context(), zmq::socket_type::router);
  peer.set(zmq::sockopt::linger, 0);
  peer.set(zmq::sockopt::rcvtimeo, 20000);
  peer.bind(address);
  std::thread sender([&] {
    Status refused = SendUntilRefused(address, "anything");
    EXPECT_EQ(refused.code(), StatusCode::kIncompatible) << refused.ToString();
    EXPECT_NE(refused.message().find("runs orrery 9.0.0 (protocol version 9)"), std::string::npos)
        << refused.message();
    EXPECT_NE(refused.message().find(orrery::VersionLine()), std::string::npos);
    CloseThreadSockets();
  });
  std::vector<zmq::message_t> frames;
  ASSERT_TRUE(zmq::recv_multipart(peer, std::back_inserter(frames)));
  std::string refusal{char(proto::kMagic0), char(proto::kMagic1), char(9),
                      char(proto::kVersionRefusalType)};
  refusal += "9.0.0";
  peer.send(frames[0], zmq::send_flags::sndmore);
  peer.send(zmq::buffer(refusal));
  sender.join();
  peer.close();
  ::unlink(address.substr(std::string("ipc://").size()).c_str());
}

TEST(TransportTest, RequestIdsStartAtARandomNonZeroPointPerProcess) {
  uint64_t base = proto::RequestIdBase();
  EXPECT_NE(base, 0u);
  EXPECT_EQ(base, proto::RequestIdBase()) << "stable within a process";
  // Far from the small numbers every process used to start at.
  EXPECT_GT(base, uint64_t(1) << 20);
}

}  // namespace
}  // namespace orrery::transport
