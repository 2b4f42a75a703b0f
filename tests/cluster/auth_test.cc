// Authentication against a real `orrery head` and `orrery node` (docs/security.md): a peer
// without the cluster token gets nothing through to the head, a node or a worker inbox
// (plain ZeroMQ, CURVE with a key of its own, CURVE with another cluster's token), the
// daemons log who they refused, and keep serving the cluster's own clients. A driver with a
// wrong token, no token, or --insecure fails at once with ConnectionError saying so.
//
// This binary is also the drivers it starts: `auth_test --driver ADDRESS`.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "actors/internal/test_hooks.h"
#include "core/internal/protocol.h"
#include "core/internal/security.h"
#include "orrery/orrery.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/skip_exit_code.h"

using orrery::proto::MsgType;
using orrery_cluster::WaitFor;

namespace {

class Counter {
 public:
  static Counter* Create(int start) { return new Counter(start); }
  explicit Counter(int start) : value_(start) {}
  int Inc(int by) { return value_ += by; }
  std::string Address() { return orrery::internal::WorkerAddressForTest(); }

 private:
  int value_;
};

ORRERY_REMOTE(Counter::Create, &Counter::Inc, &Counter::Address);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string Endpoint(const std::string& address) {
  return address.rfind("tcp://", 0) == 0 ? address : "tcp://" + address;
}

// How a stranger's socket is set up.
enum class Stranger {
  kPlain,            // no security at all (ZeroMQ's NULL mechanism)
  kOwnKey,           // CURVE with the cluster's server key (as if leaked) but a key pair of its own
  kOtherClusterKey,  // CURVE with the key pair of another cluster's token
};

const char* Name(Stranger s) {
  switch (s) {
    case Stranger::kPlain:
      return "a plain ZeroMQ peer";
    case Stranger::kOwnKey:
      return "a CURVE peer with a key of its own";
    case Stranger::kOtherClusterKey:
      return "a CURVE peer holding another cluster's token";
  }
  return "?";
}

void SetUpStranger(zmq::socket_t& s, Stranger kind) {
  if (kind == Stranger::kPlain) return;
  orrery::security::Credentials cluster = orrery::security::ProcessCredentials();
  orrery::security::Credentials other =
      orrery::security::FromToken(orrery::security::NewToken(), "elsewhere");
  s.set(zmq::sockopt::curve_serverkey,
        zmq::buffer(kind == Stranger::kOwnKey ? cluster.public_key : other.public_key));
  s.set(zmq::sockopt::curve_publickey, zmq::buffer(other.public_key));
  s.set(zmq::sockopt::curve_secretkey, zmq::buffer(other.secret_key));
}

// Sends `frame` from a fresh DEALER set up as `kind`; returns whether anything came back
// within `wait_ms` (an authenticated peer gets an answer to each of these messages).
bool GetsAnyReply(zmq::context_t& ctx, const std::string& address, const std::string& frame,
                  Stranger* kind, int wait_ms) {
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  if (kind) {
    SetUpStranger(dealer, *kind);
  } else {
    orrery::security::ConfigureClient(dealer);
  }
  dealer.connect(Endpoint(address));
  dealer.send(zmq::buffer(frame), zmq::send_flags::dontwait);
  zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, std::chrono::milliseconds(wait_ms));
  return item.revents & ZMQ_POLLIN;
}

// A message that any inbox answers (a kError reply: it is not a valid registration).
std::string Garbage() {
  return orrery::proto::EncodeFrame(MsgType::kRegisterJob, std::string("not a job"));
}

std::string NodeRegistration(const std::string& fake_address) {
  orrery::proto::RegisterNodeMsg m;
  m.node.node_id = std::string(32, 'a');
  m.node.address = fake_address;
  m.node.total = {{"CPU", 64}};
  m.node.available = {{"CPU", 64}};
  m.reply_to = fake_address;
  return orrery::proto::EncodeFrame(MsgType::kRegisterNode, m);
}

struct DriverResult {
  int exit_code = -1;
  std::string output;
  double seconds = 0;
};

// Runs this binary as a driver against `address` with `env` added to the environment.
DriverResult RunDriver(const std::string& address, const std::string& log,
                       const std::vector<std::pair<std::string, std::string>>& env,
                       bool drop_token_env) {
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    if (drop_token_env) unsetenv("ORRERY_TOKEN_FILE");
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    freopen(log.c_str(), "w", stdout);
    dup2(fileno(stdout), 2);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    execl(self, self, "--driver", address.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  DriverResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.output = ReadFile(log);
  return r;
}

int DriverMain(const std::string& address) {
  try {
    orrery::Config c;
    c.address = address;
    orrery::Init(c);
    auto counter = orrery::Actor(Counter::Create).Remote(1);
    int v = *orrery::Get(counter.Task(&Counter::Inc).Remote(1), 30000);
    orrery::Shutdown();
    std::printf("driver ok %d\n", v);
    return v == 2 ? 0 : 1;
  } catch (const orrery::ConnectionError& e) {
    std::printf("ConnectionError: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::printf("other error: %s\n", e.what());
    return 4;
  }
}

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.StartHead();
    cluster_.AddNode("", "", 2);
    orrery::Config c;
    c.address = cluster_.head_address();
    orrery::Init(c);
    ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == 1; }));
  }
  void TearDown() override { orrery::Shutdown(); }

  // Every kind of stranger sends `frame` to `address` and gets nothing back, while the
  // cluster's own key gets an answer to the same bytes.
  void ExpectStrangersRefused(const std::string& address, const std::string& frame,
                              const char* what) {
    for (Stranger kind : {Stranger::kPlain, Stranger::kOwnKey, Stranger::kOtherClusterKey}) {
      EXPECT_FALSE(GetsAnyReply(ctx_, address, frame, &kind, 700))
          << Name(kind) << " got an answer from " << what;
    }
    EXPECT_TRUE(GetsAnyReply(ctx_, address, frame, nullptr, 10000))
        << "the cluster's own key got no answer from " << what;
  }

  orrery_cluster::Cluster cluster_;
  zmq::context_t ctx_;
};

TEST_F(AuthTest, StrangersGetNothingThroughToTheHeadANodeOrAWorker) {
  auto counter = orrery::Actor(Counter::Create).Remote(0);
  std::string worker = *orrery::Get(counter.Task(&Counter::Address).Remote(), 30000);
  std::string node = orrery::Nodes().at(0).address;
  ExpectStrangersRefused(cluster_.head_address(), Garbage(), "the head");
  ExpectStrangersRefused(node, Garbage(), "the node");
  ExpectStrangersRefused(worker, Garbage(), "a worker");

  // A well-formed node registration from a stranger registers nothing.
  orrery_cluster::DeadPort fake_port;
  std::string fake = fake_port.address();
  for (Stranger kind : {Stranger::kPlain, Stranger::kOwnKey, Stranger::kOtherClusterKey}) {
    GetsAnyReply(ctx_, cluster_.head_address(), NodeRegistration(fake), &kind, 300);
  }
  // The head has answered a request of ours since (so it read what came before it).
  EXPECT_EQ(*orrery::Get(counter.Task(&Counter::Inc).Remote(5), 30000), 5);
  EXPECT_EQ(orrery::Nodes().size(), 1u) << "a stranger registered a node";

  // Each daemon said whom it refused, naming the address.
  EXPECT_TRUE(WaitFor([&] {
    return ReadFile(cluster_.dir() + "/head.log").find("refused a connection from 127.0.0.1") !=
           std::string::npos;
  })) << ReadFile(cluster_.dir() + "/head.log");
  EXPECT_TRUE(WaitFor([&] {
    return ReadFile(cluster_.dir() + "/node0.log").find("refused a connection from 127.0.0.1") !=
           std::string::npos;
  })) << ReadFile(cluster_.dir() + "/node0.log");
}

TEST_F(AuthTest, ADriverWithTheTokenWorks) {
  DriverResult r =
      RunDriver(cluster_.head_address(), cluster_.dir() + "/good_driver.log", {}, false);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(AuthTest, ADriverWithAWrongTokenFailsAtOnceSayingSo) {
  std::string wrong = cluster_.dir() + "/wrong_token";
  ASSERT_TRUE(orrery::security::WriteSecretFile(wrong, orrery::security::NewToken()).ok());
  DriverResult r = RunDriver(cluster_.head_address(), cluster_.dir() + "/wrong_driver.log",
                             {{"ORRERY_TOKEN_FILE", wrong}}, false);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("authentication with the cluster at"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(wrong), std::string::npos)
      << "the error names the token file used: " << r.output;
  // Fails on the refused handshake, not on a request's timeout (many seconds).
  EXPECT_LT(r.seconds, 10.0) << r.output;
  std::printf("a driver with a wrong token failed after %.2f s\n", r.seconds);
}

TEST_F(AuthTest, ADriverWithoutATokenFailsSayingWhereItIsExpected) {
  // An empty session root: no session of this host knows the head either.
  std::string empty = cluster_.dir() + "/no_sessions";
  std::filesystem::create_directories(empty);
  DriverResult r = RunDriver(cluster_.head_address(), cluster_.dir() + "/no_token_driver.log",
                             {{"ORRERY_TMPDIR", empty}}, true);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("no cluster token"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ORRERY_TOKEN_FILE"), std::string::npos) << r.output;
}

TEST_F(AuthTest, AnInsecureDriverIsRefusedSayingSo) {
  DriverResult r = RunDriver(cluster_.head_address(), cluster_.dir() + "/insecure_driver.log",
                             {{"ORRERY_INSECURE", "1"}}, true);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("authentication with the cluster at"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 10.0) << r.output;
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  if (argc == 3 && std::string(argv[1]) == "--driver") return DriverMain(argv[2]);
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
