// A node the head refuses does not believe it joined: `orrery node` exits non-zero at once,
// printing the head's reason, and writes no readiness file (so nothing waiting on that file
// takes it for a member of the cluster). A node refused later, on a heartbeat, stops and
// exits non-zero with the reason instead of heartbeating on.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>
#include <zmq_addon.hpp>

#include "core/internal/protocol.h"
#include "core/internal/security.h"
#include "core/internal/transport.h"
#include "orrery/orrery.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/skip_exit_code.h"

using orrery_cluster::WaitFor;

namespace {

TEST(NodeRefused, ExitsWithTheHeadsReasonAndNoReadyFile) {
  orrery_cluster::Cluster cluster;
  cluster.StartHead();
  std::string ready = cluster.dir() + "/refused-node.ready";
  std::string log = cluster.dir() + "/refused-node.log";
  // The head refuses a node whose label value is not UTF-8 (an Ack with ok=false).
  int pid = orrery_cluster::Spawn({orrery_cluster::CliPath(), "node", "--address",
                                   cluster.head_address(), "--num-cpus", "1", "--labels",
                                   "region=s\xfc"
                                   "d",
                                   "--ready-file", ready},
                                  log);
  int status = 0;
  bool exited = WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 30000);
  if (!exited) orrery_cluster::KillHard(pid);
  ASSERT_TRUE(exited) << "a refused node kept running:\n" << orrery_cluster::LogTail(log);
  ASSERT_TRUE(WIFEXITED(status)) << orrery_cluster::LogTail(log);
  EXPECT_NE(WEXITSTATUS(status), 0) << orrery_cluster::LogTail(log);
  std::string tail = orrery_cluster::LogTail(log);
  EXPECT_NE(tail.find("refused this node"), std::string::npos) << tail;
  EXPECT_NE(tail.find("UTF-8"), std::string::npos) << "the head's reason is missing:\n" << tail;
  EXPECT_FALSE(std::filesystem::exists(ready)) << "a refused node wrote its readiness file";
}

// A head of the test's: it accepts the node's first registrations, then refuses its
// heartbeats, as a head does for a node the autoscaler removed.
TEST(NodeRefused, ANodeRefusedOnAHeartbeatExitsWithTheReason) {
  orrery_cluster::Cluster cluster;  // its directory and token only: no Redis, no head
  orrery::transport::Inbox head;
  ASSERT_TRUE(head.Bind("127.0.0.1").ok());
  std::atomic<int> registrations{0};
  head.Start([&](orrery::transport::Envelope& env) {
    if (env.type != orrery::proto::MsgType::kRegisterNode) return;
    orrery::proto::RegisterNodeMsg m;
    if (!env.Decode(&m).ok() || !m.node.alive) return;
    orrery::proto::AckMsg ack;
    if (++registrations > 3) {
      ack.ok = false;
      ack.message = "the autoscaler removed this node";
    }
    orrery::transport::Send(m.reply_to, orrery::proto::MsgType::kAck, ack);
  });
  std::string ready = cluster.dir() + "/node.ready";
  std::string log = cluster.dir() + "/node.log";
  int pid =
      orrery_cluster::Spawn({orrery_cluster::CliPath(), "node", "--address", head.address(),
                             "--num-cpus", "1", "--heartbeat-s", "0.1", "--ready-file", ready},
                            log);
  int status = 0;
  bool exited = WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 30000);
  if (!exited) orrery_cluster::KillHard(pid);
  head.Stop();
  std::string tail = orrery_cluster::LogTail(log);
  ASSERT_TRUE(exited) << "a node refused on a heartbeat kept running:\n" << tail;
  EXPECT_TRUE(std::filesystem::exists(ready)) << "it was up before it was refused:\n" << tail;
  ASSERT_TRUE(WIFEXITED(status)) << tail;
  EXPECT_NE(WEXITSTATUS(status), 0) << tail;
  EXPECT_NE(tail.find("the autoscaler removed this node"), std::string::npos) << tail;
  EXPECT_GT(registrations.load(), 3);
}

// A head of another protocol version, the test's: it answers every frame with the version
// refusal of protocol version ProtocolVersion() + 1 and "orrery 99.0.0", as a head of any
// version does to this one's frames.
class OtherVersionHead {
 public:
  OtherVersionHead() : socket_(orrery::transport::Context(), zmq::socket_type::router) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvtimeo, 200);
    orrery::security::ConfigureServer(orrery::transport::Context(), socket_);
    socket_.bind("tcp://127.0.0.1:*");
    address_ = socket_.get(zmq::sockopt::last_endpoint);
    refusal_ = {char(orrery::proto::kMagic0), char(orrery::proto::kMagic1), char(other()),
                char(orrery::proto::kVersionRefusalType)};
    refusal_ += "99.0.0";
  }
  static int other() { return orrery::ProtocolVersion() + 1; }
  const std::string& address() const { return address_; }
  // Answers what came within 200 ms.
  void Serve() {
    std::vector<zmq::message_t> frames;
    if (zmq::recv_multipart(socket_, std::back_inserter(frames)) && frames.size() >= 2) {
      socket_.send(frames[0], zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      socket_.send(zmq::buffer(refusal_), zmq::send_flags::dontwait);
    }
  }
  // Serves until `pid` exits (true, its wait status in *status) or 30 s pass.
  bool ServeUntilExit(int pid, int* status) {
    bool exited = WaitFor(
        [&] {
          Serve();
          return waitpid(pid, status, WNOHANG) == pid;
        },
        30000);
    if (!exited) orrery_cluster::KillHard(pid);
    return exited;
  }
  // What a process it refused says: both versions.
  static void ExpectBothVersions(const std::string& text) {
    EXPECT_NE(text.find("runs orrery 99.0.0 (protocol version " + std::to_string(other()) + ")"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find(orrery::VersionLine()), std::string::npos) << text;
  }

 private:
  zmq::socket_t socket_;
  std::string address_;
  std::string refusal_;
};

// `orrery node` against a head of another protocol version exits non-zero at once, naming
// both versions, and writes no readiness file.
TEST(NodeRefused, ANodeRefusedForItsProtocolVersionNamesBothVersions) {
  orrery_cluster::Cluster cluster;  // its directory and token only
  OtherVersionHead head;
  std::string ready = cluster.dir() + "/node.ready";
  std::string log = cluster.dir() + "/node.log";
  int pid = orrery_cluster::Spawn({orrery_cluster::CliPath(), "node", "--address", head.address(),
                                   "--num-cpus", "1", "--ready-file", ready},
                                  log);
  int status = 0;
  bool exited = head.ServeUntilExit(pid, &status);
  std::string tail = orrery_cluster::LogTail(log);
  ASSERT_TRUE(exited) << "a node of another protocol version kept running:\n" << tail;
  ASSERT_TRUE(WIFEXITED(status)) << tail;
  EXPECT_NE(WEXITSTATUS(status), 0) << tail;
  OtherVersionHead::ExpectBothVersions(tail);
  EXPECT_FALSE(std::filesystem::exists(ready)) << tail;
}

// A driver (this binary, run as `--init-driver ADDRESS`): orrery::Init() throws
// ConnectionError naming both versions.
TEST(NodeRefused, ADriverRefusedForItsProtocolVersionNamesBothVersions) {
  orrery_cluster::Cluster cluster;  // its directory and token only
  OtherVersionHead head;
  std::string log = cluster.dir() + "/driver.log";
  int pid = orrery_cluster::Spawn({"/proc/self/exe", "--init-driver", head.address()}, log);
  int status = 0;
  bool exited = head.ServeUntilExit(pid, &status);
  std::string tail = orrery_cluster::LogTail(log);
  ASSERT_TRUE(exited) << "a driver of another protocol version hung in Init():\n" << tail;
  ASSERT_TRUE(WIFEXITED(status)) << tail;
  EXPECT_EQ(WEXITSTATUS(status), 3) << "Init() should throw ConnectionError:\n" << tail;
  OtherVersionHead::ExpectBothVersions(tail);
}

// The other way round, against a real head: a node's registration in another protocol
// version is refused, and the refusal names both versions at both ends.
TEST(NodeRefused, AHeadRefusesARegistrationOfAnotherProtocolVersion) {
  orrery_cluster::Cluster cluster;
  cluster.StartHead();
  std::string frame{char(orrery::proto::kMagic0), char(orrery::proto::kMagic1),
                    char(orrery::ProtocolVersion() + 1),
                    char(orrery::proto::MsgType::kRegisterNode)};
  const std::string head = "tcp://" + cluster.head_address();
  orrery::Status refused = orrery::Status::Ok();
  EXPECT_TRUE(WaitFor(
      [&] {
        refused = orrery::transport::TrySendFrames(head, frame, nullptr);
        return refused.code() == orrery::StatusCode::kIncompatible;
      },
      30000))
      << refused.ToString();
  EXPECT_NE(refused.message().find(std::string("runs orrery ") + orrery::Version() +
                                   " (protocol version " +
                                   std::to_string(orrery::ProtocolVersion()) + ")"),
            std::string::npos)
      << refused.message();
  std::string want = "the peer speaks protocol version " +
                     std::to_string(orrery::ProtocolVersion() + 1) + "; this is " +
                     orrery::VersionLine();
  const std::string head_log = cluster.dir() + "/head.log";
  EXPECT_TRUE(WaitFor(
      [&] { return orrery_cluster::LogTail(head_log, 200).find(want) != std::string::npos; },
      10000))
      << orrery_cluster::LogTail(head_log);
  orrery::transport::CloseThreadSockets();
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  if (argc == 3 && std::string(argv[1]) == "--init-driver") {
    orrery::Config config;
    config.address = argv[2];
    try {
      orrery::Init(config);
    } catch (const orrery::ConnectionError& e) {
      std::printf("ConnectionError: %s\n", e.what());
      return 3;
    }
    orrery::Shutdown();
    return 0;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
