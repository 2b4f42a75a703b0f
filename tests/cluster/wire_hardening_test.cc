// The wire layer against a real `orrery head` and `orrery node` (docs/protocol.md "Limits",
// "Request ids", "Ending a job"): drivers run back to back and in churn, a peer sends a
// msgpack bomb or asks for replies to a port nobody reads, stale replies arrive. The head and
// the node stay bounded in memory and descriptors and keep serving.
//
// This binary is also the drivers it starts: `wire_hardening_test --named-driver ADDRESS`
// and `--churn-driver ADDRESS`.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "actors/internal/test_hooks.h"
#include "core/internal/file_hash.h"
#include "core/internal/protocol.h"
#include "core/internal/security.h"
#include "core/internal/transport.h"
#include "orrery/orrery.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/sanitizers.h"
#include "tests/skip_exit_code.h"

using orrery::proto::MsgType;
using orrery_cluster::WaitFor;

namespace {

// Under AddressSanitizer freed memory is held back in a quarantine (256 MiB by default)
// before it is reused, so a process that allocates and drops many large messages peaks
// that much higher. The RSS bounds below allow for it there; the plain build checks them
// as they are.
constexpr long kAsanQuarantineKb = orrery_test::kAddressSanitizer ? 256 * 1024 : 0;

class Greeter {
 public:
  explicit Greeter(int start) : value_(start) {}
  static Greeter* Create(int start) { return new Greeter(start); }
  int Inc(int by) { return value_ += by; }

 private:
  int value_;
};

int Add(int a, int b) { return a + b; }

ORRERY_REMOTE(Greeter::Create, &Greeter::Inc, Add);

orrery::Config DriverConfig(const std::string& address) {
  orrery::Config c;
  c.address = address;
  return c;
}

// What examples/hello_actors does that a previous run can get in the way of: a task (CPUs
// leased), a named actor (a name unique in its namespace), a call; then Shutdown and exit,
// or (`explicit_shutdown` false) just exit, leaving Shutdown to the atexit handler.
int NamedDriver(const std::string& address, bool explicit_shutdown) {
  try {
    orrery::Init(DriverConfig(address));
    int three = *orrery::Get(orrery::Task(Add).Remote(1, 2), 30000);
    orrery::Actor(Greeter::Create).SetName("greeter_count").Remote(41);
    auto named = orrery::GetActor<Greeter>("greeter_count");
    if (!named) throw std::runtime_error("GetActor found no greeter_count");
    int v = *orrery::Get(named->Task(&Greeter::Inc).Remote(1), 30000);
    if (explicit_shutdown) orrery::Shutdown();
    if (three != 3 || v != 42)
      throw std::runtime_error("wrong values " + std::to_string(three) + " " + std::to_string(v));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "driver failed: %s\n", e.what());
    return 1;
  }
}

// The smallest driver that reaches every daemon: Init, one task, Shutdown.
int ChurnDriver(const std::string& address) {
  try {
    orrery::Init(DriverConfig(address));
    int three = *orrery::Get(orrery::Task(Add).Remote(1, 2), 30000);
    orrery::Shutdown();
    return three == 3 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "driver failed: %s\n", e.what());
    return 1;
  }
}

// Runs this binary as a driver and returns its exit status (-1: it did not exit normally).
int RunDriver(const std::string& role, const std::string& address, const std::string& log) {
  int pid = orrery_cluster::Spawn({"/proc/self/exe", role, address}, log);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A field of /proc/PID/status in kB (VmHWM: the peak resident set size).
long StatusKb(int pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

int OpenFds(int pid) {
  DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

std::string Endpoint(const std::string& address) {
  return address.find("://") == std::string::npos ? "tcp://" + address : address;
}

std::string Frame(MsgType type, const std::string& meta) {
  using namespace orrery::proto;
  return std::string{char(kMagic0), char(kMagic1), char(kProtocolVersion), char(type)} + meta;
}

class WireHardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.StartHead(0.2, 5);
    node_pid_ = cluster_.AddNode("", "", 2);
    head_pid_ = HeadPid();
    ASSERT_GT(head_pid_, 0);
  }

  // The head daemon: the child of this process whose command line says `head`.
  int HeadPid() {
    DIR* d = opendir("/proc");
    int found = -1;
    while (dirent* e = readdir(d)) {
      int pid = std::atoi(e->d_name);
      if (pid <= 0) continue;
      std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
      size_t close = stat.rfind(')');
      if (close == std::string::npos) continue;
      int ppid = 0;
      std::sscanf(stat.c_str() + close + 2, "%*c %d", &ppid);
      if (ppid != getpid()) continue;
      std::string cmd = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
      if (cmd.find(std::string("head") + '\0') != std::string::npos) found = pid;
    }
    closedir(d);
    return found;
  }

  orrery_cluster::Cluster cluster_;
  int node_pid_ = -1;
  int head_pid_ = -1;
  zmq::context_t ctx_;
};

// Each run must find the name free and the CPUs back: the previous run's goodbye reached the
// head before that process exited, and the head freed its actors and leases at once. Every
// other run leaves Shutdown to the atexit handler, which must say goodbye just the same
// (and exit cleanly).
TEST_F(WireHardeningTest, BackToBackDriversFindTheirNamedActorFree) {
  for (int run = 0; run < 20; ++run) {
    std::string log = cluster_.dir() + "/driver" + std::to_string(run) + ".log";
    int rc = RunDriver(run % 2 ? "--named-driver-atexit" : "--named-driver",
                       cluster_.head_address(), log);
    ASSERT_EQ(rc, 0) << "run " << run << " failed:\n" << ReadFile(log);
  }
}

// A 64 MiB msgpack array of nils in a message's meta: before the limits, the head built a
// 24-byte object per nil (1.5 GiB). It must answer with an error and stay small.
TEST_F(WireHardeningTest, NilBombLeavesTheHeadSmallAndServing) {
  const uint32_t n = 64u << 20;
  std::string bomb{char(0xdd), char(n >> 24), char((n >> 16) & 0xff), char((n >> 8) & 0xff),
                   char(n & 0xff)};
  bomb.append(n, char(0xc0));
  std::string frame = Frame(MsgType::kRegisterJob, bomb);
  bomb.clear();
  bomb.shrink_to_fit();
  zmq::socket_t dealer(ctx_, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  orrery::security::ConfigureClient(dealer);  // a peer of the cluster, not a stranger
  dealer.connect(Endpoint(cluster_.head_address()));
  for (int i = 0; i < 3; ++i) dealer.send(zmq::buffer(frame), zmq::send_flags::none);
  // Three error replies: the head decoded (and refused) all three.
  int errors = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (errors < 3 && std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(100));
    if (!(item.revents & ZMQ_POLLIN)) continue;
    zmq::message_t part;
    if (!dealer.recv(part, zmq::recv_flags::none)) continue;
    auto header = orrery::proto::DecodeHeader(part.data(), part.size());
    if (header.ok() && header->type == MsgType::kError) ++errors;
  }
  EXPECT_EQ(errors, 3) << "the head should reject each bomb with an error reply";
  long peak_kb = StatusKb(head_pid_, "VmHWM");
  EXPECT_GT(peak_kb, 0);
  EXPECT_LT(peak_kb, 300 * 1024) << "the head's peak RSS";
  orrery::Init(DriverConfig(cluster_.head_address()));
  EXPECT_EQ(orrery::Nodes().size(), 1u);
  EXPECT_EQ(*orrery::Get(orrery::Task(Add).Remote(2, 3), 30000), 5);
  orrery::Shutdown();
}

// Requests for a driver executable whose replies go to a port nobody listens on: each reply
// (the whole executable) waited in an unbounded queue. The queue to that peer is capped.
TEST_F(WireHardeningTest, FetchBinaryFloodToADeadPortLeavesTheHeadSmall) {
  orrery::Init(DriverConfig(cluster_.head_address()));  // uploads this executable
  std::string hash = orrery::HashFile("/proc/self/exe");
  std::ifstream self("/proc/self/exe", std::ios::binary | std::ios::ate);
  long long size = self.tellg();
  ASSERT_GT(size, 0);
  long before_kb = StatusKb(head_pid_, "VmRSS");
  // Enough requests that their replies, all queued, would take at least 1 GiB.
  int requests = int(std::max<long long>(150, (1ll << 30) / size + 1));
  orrery_cluster::DeadPort dead_port;  // bound, never listening: every connection refused
  std::string dead = dead_port.address();
  zmq::socket_t dealer(ctx_, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 2000);
  orrery::security::ConfigureClient(dealer);
  dealer.connect(Endpoint(cluster_.head_address()));
  for (int i = 0; i < requests; ++i) {
    orrery::proto::BinaryMsg m{uint64_t(i + 1), dead, hash, "", true, ""};
    std::string frame = orrery::proto::EncodeFrame(MsgType::kFetchBinary, m);
    dealer.send(zmq::buffer(frame), zmq::send_flags::none);
  }
  // The head has handled them all once it answers a malformed frame sent after them on the
  // same connection (with a kError to this socket).
  dealer.send(zmq::buffer(std::string("junk")), zmq::send_flags::none);
  bool answered = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!answered && std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(100));
    zmq::message_t part;
    while ((item.revents & ZMQ_POLLIN) && dealer.recv(part, zmq::recv_flags::dontwait)) {
      auto header = orrery::proto::DecodeHeader(part.data(), part.size());
      answered = answered || (header.ok() && header->type == MsgType::kError);
    }
  }
  ASSERT_TRUE(answered) << "the head did not answer after the flood";
  long peak_kb = StatusKb(head_pid_, "VmHWM");
  EXPECT_LT(peak_kb - before_kb, 200 * 1024 + kAsanQuarantineKb)
      << requests << " replies of " << size << " bytes each; RSS before " << before_kb << " kB";
  EXPECT_EQ(*orrery::Get(orrery::Task(Add).Remote(2, 3), 30000), 5);
  orrery::Shutdown();
}

// A reply meant for an earlier process that had this address (request ids 1, 2, 3... as
// every process used to number them) must never complete a request of this one.
TEST_F(WireHardeningTest, StaleRepliesCompleteNoRequest) {
  orrery::Init(DriverConfig(cluster_.head_address()));
  std::string self = orrery::internal::WorkerAddressForTest();
  std::atomic<bool> stop{false};
  std::thread flood([&] {
    zmq::socket_t dealer(ctx_, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    orrery::security::ConfigureClient(dealer);
    dealer.connect(Endpoint(self));
    while (!stop) {
      for (uint64_t id = 1; id <= 256 && !stop; ++id) {
        orrery::proto::NamedActorMsg stale{id, "", "stale", "default", std::string(16, 'x')};
        std::string frame = orrery::proto::EncodeFrame(MsgType::kGetNamedActorReply, stale);
        dealer.send(zmq::buffer(frame), zmq::send_flags::dontwait);
      }
    }
  });
  int wrong = 0;
  for (int i = 0; i < 100; ++i)
    wrong += orrery::GetActor<Greeter>("nobody_has_this_name").has_value();
  stop = true;
  flood.join();
  EXPECT_EQ(wrong, 0) << "lookups answered by a stale reply";
  orrery::Shutdown();
}

// 500 short-lived drivers, a few at a time: the head and the node close their sockets to
// drivers that are gone, so their descriptor counts stay bounded and come back down.
TEST_F(WireHardeningTest, DriverChurnKeepsDescriptorsBounded) {
  // One driver first, so that the zygote and a worker exist before the baseline.
  ASSERT_EQ(RunDriver("--churn-driver", cluster_.head_address(), cluster_.dir() + "/warm.log"), 0);
  int head_base = OpenFds(head_pid_), node_base = OpenFds(node_pid_);
  int head_max = head_base, node_max = node_base;
  constexpr int kDrivers = 500, kAtOnce = 4;
  int failures = 0;
  for (int started = 0; started < kDrivers; started += kAtOnce) {
    std::vector<int> pids;
    std::string log = cluster_.dir() + "/churn.log";
    for (int i = 0; i < kAtOnce; ++i)
      pids.push_back(orrery_cluster::Spawn(
          {"/proc/self/exe", "--churn-driver", cluster_.head_address()}, log));
    for (int pid : pids) {
      int status = 0;
      waitpid(pid, &status, 0);
      failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    head_max = std::max(head_max, OpenFds(head_pid_));
    node_max = std::max(node_max, OpenFds(node_pid_));
  }
  EXPECT_EQ(failures, 0) << ReadFile(cluster_.dir() + "/churn.log");
  std::printf("descriptors: head %d at the start, %d at most; node %d at the start, %d at most\n",
              head_base, head_max, node_base, node_max);
  // Before the bounds, each driver left the head 1 and the node 2 descriptors for good (500
  // and 1,000 here). Now a sending thread keeps at most max_sockets_per_thread sockets (the
  // daemons run with the defaults), one descriptor each, whatever the number of drivers:
  // the bound is that cap plus a margin for the daemons' other descriptors. Those vary with
  // the machine's load: the connections of drivers that left and that the daemon has not
  // yet seen close, and sockets evicted while still holding messages for drivers still there
  // (they drain outside the cap; those for drivers that ended close at once, where the head
  // went 340 over its start on a loaded machine before). On a loaded machine they came to 41 (40
  // was the margin then). The acknowledgements that wait for Redis go out from the head's inbox
  // thread too: sent from the store's writer, after every driver's kills and lease returns, they
  // kept a socket to every driver (head 340 over its start, 112 descriptors a minute later).
  const int bound = int(orrery::transport::SendLimits{}.max_sockets_per_thread) + 64;
  EXPECT_LT(head_max - head_base, bound) << "head: " << head_base << " at the start";
  EXPECT_LT(node_max - node_base, bound) << "node: " << node_base << " at the start";
  // Idle sockets to drivers that are gone close.
  EXPECT_TRUE(WaitFor([&] { return OpenFds(head_pid_) <= head_base + 20; }, 60000))
      << "head: " << OpenFds(head_pid_) << " descriptors, " << head_base << " at the start";
  EXPECT_TRUE(WaitFor([&] { return OpenFds(node_pid_) <= node_base + 20; }, 60000))
      << "node: " << OpenFds(node_pid_) << " descriptors, " << node_base << " at the start";
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  if (argc == 3 && std::string(argv[1]) == "--named-driver") return NamedDriver(argv[2], true);
  if (argc == 3 && std::string(argv[1]) == "--named-driver-atexit")
    return NamedDriver(argv[2], false);
  if (argc == 3 && std::string(argv[1]) == "--churn-driver") return ChurnDriver(argv[2]);
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
