// What a node runs, against a real `orrery head`, `orrery node` and redis-server: a peer
// that holds the cluster's token (so its messages pass authentication) still cannot make a
// node run a program no job registered, cannot store an executable no registering job asked
// for, and cannot speak for a node; a record written into Redis by someone else names
// nothing a node runs (docs/design-decisions.md "Nodes run only registered executables",
// docs/protocol.md "Node-scoped messages").
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "core/internal/file_hash.h"
#include "core/internal/protocol.h"
#include "core/internal/security.h"
#include "core/internal/transport.h"
#include "orrery/ids.h"
#include "orrery/orrery.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/cluster/redis_client.h"

using orrery::UniqueId;
using orrery::proto::MsgType;
using orrery_cluster::Redis;
using orrery_cluster::WaitFor;
namespace proto = orrery::proto;
namespace security = orrery::security;
namespace transport = orrery::transport;

namespace {

const std::string kPrefix = "orrery:default:";

int Add(int a, int b) { return a + b; }

class Counter {
 public:
  static Counter* Create(int start) { return new Counter{start}; }
  int Inc(int by) { return value += by; }
  int value = 0;
};

ORRERY_REMOTE(Add, Counter::Create, &Counter::Inc);

std::string Hex(const std::string& binary) { return UniqueId::FromBinary(binary).Hex(); }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// An authenticated peer speaking the wire protocol directly: sends on a raw DEALER that
// holds the cluster's key, and collects answers on an inbox of its own.
class Peer {
 public:
  Peer() {
    EXPECT_TRUE(inbox_.Bind("127.0.0.1").ok());
    inbox_.Start([this](transport::Envelope& env) { OnMessage(env); }, "test-peer");
  }
  ~Peer() { inbox_.Stop(); }
  const std::string& address() const { return inbox_.address(); }

  template <typename T>
  void Send(const std::string& to, MsgType type, const T& msg,
            const std::string* payload = nullptr) {
    auto& s = Dealer(to);
    std::string frame = proto::EncodeFrame(type, msg);
    s.send(zmq::buffer(frame), payload ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (payload) s.send(zmq::buffer(*payload), zmq::send_flags::none);
  }

  uint64_t NextId() { return next_id_++; }

  std::optional<proto::AckMsg> WaitAck(uint64_t id, int timeout_ms = 10000) {
    return Wait(acks_, id, timeout_ms);
  }

  std::optional<proto::ClusterInfoMsg> ClusterInfo(const std::string& head) {
    uint64_t id = NextId();
    Send(head, MsgType::kGetClusterInfo, proto::ClusterInfoMsg{id, address(), {}});
    return Wait(infos_, id, 10000);
  }

  std::optional<proto::ActorUpdateMsg> ActorState(const std::string& head,
                                                  const std::string& actor_id) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      updates_.erase(actor_id);
    }
    Send(head, MsgType::kSubscribeActor, proto::SubscribeActorMsg{actor_id, address()});
    return Wait(updates_, actor_id, 10000);
  }

  // Whether `to` answers a ping (it has handled everything this peer sent it before).
  bool Ping(const std::string& to) {
    uint64_t id = NextId();
    Send(to, MsgType::kPing, proto::PingMsg{id, address()});
    return Wait(pongs_, id, 10000).has_value();
  }

  std::optional<proto::LeaseReplyMsg> WaitLease(uint64_t id) { return Wait(leases_, id, 10000); }

 private:
  zmq::socket_t& Dealer(const std::string& to) {
    auto& s = dealers_[to];
    if (!s) {
      s = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
      s->set(zmq::sockopt::linger, 1000);
      security::ConfigureClient(*s);
      s->connect(to.find("://") == std::string::npos ? "tcp://" + to : to);
    }
    return *s;
  }

  template <typename K, typename V>
  std::optional<V> Wait(std::map<K, V>& from, const K& key, int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return from.count(key) > 0; })) {
      return std::nullopt;
    }
    return from[key];
  }

  void OnMessage(transport::Envelope& env) {
    std::lock_guard<std::mutex> lock(mu_);
    if (env.type == MsgType::kAck) {
      proto::AckMsg m;
      if (env.Decode(&m).ok()) acks_[m.request_id] = m;
    } else if (env.type == MsgType::kClusterInfoReply) {
      proto::ClusterInfoMsg m;
      if (env.Decode(&m).ok()) infos_[m.request_id] = m;
    } else if (env.type == MsgType::kActorUpdate) {
      proto::ActorUpdateMsg m;
      if (env.Decode(&m).ok()) updates_[m.actor_id] = m;
    } else if (env.type == MsgType::kPong) {
      proto::PingMsg m;
      if (env.Decode(&m).ok()) pongs_[m.request_id] = m;
    } else if (env.type == MsgType::kLeaseReply) {
      proto::LeaseReplyMsg m;
      if (env.Decode(&m).ok()) leases_[m.request_id] = m;
    }
    cv_.notify_all();
  }

  zmq::context_t ctx_;
  std::map<std::string, std::unique_ptr<zmq::socket_t>> dealers_;
  transport::Inbox inbox_;
  std::atomic<uint64_t> next_id_{1};
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, proto::AckMsg> acks_;
  std::map<uint64_t, proto::ClusterInfoMsg> infos_;
  std::map<std::string, proto::ActorUpdateMsg> updates_;
  std::map<uint64_t, proto::PingMsg> pongs_;
  std::map<uint64_t, proto::LeaseReplyMsg> leases_;
};

class ExecPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<orrery_cluster::Cluster>();
    cluster_->StartHead(0.2, 5);
    cluster_->AddNode("", "", 2);
    // The fixture made the cluster's token and gave this process its credentials: the peer
    // below is authenticated.
    ASSERT_FALSE(cluster_->token_file().empty());
    peer_ = std::make_unique<Peer>();
    head_ = cluster_->head_address();
    auto info = peer_->ClusterInfo(head_);
    ASSERT_TRUE(info && info->nodes.size() == 1) << "the node did not register";
    node_id_ = info->nodes[0].node_id;
    node_address_ = info->nodes[0].address;
    victim_ = cluster_->dir() + "/ran";
    payload_ = {"/bin/sh", "-c", "touch " + victim_};
  }
  void TearDown() override {
    peer_.reset();
    cluster_.reset();
  }

  // The node daemon's log (all of it: a node logs once per refusal, rate-limited).
  std::string NodeLog() { return ReadAll(cluster_->dir() + "/node0.log"); }
  std::string HeadLog() { return ReadAll(cluster_->dir() + "/head.log"); }

  // A job registered by this peer (as a driver would, but without an executable of its own).
  std::string RegisterJob(const std::string& entrypoint, const std::string& hash) {
    proto::JobMsg job;
    job.request_id = peer_->NextId();
    job.reply_to = peer_->address();
    job.job_id = UniqueId::Random().Binary();
    job.driver_address = peer_->address();
    job.pid = int(getpid());
    job.namespace_ = "default";
    job.entrypoint = entrypoint;
    job.binary_hash = hash;
    peer_->Send(head_, MsgType::kRegisterJob, job);
    auto ack = peer_->WaitAck(job.request_id);
    EXPECT_TRUE(ack.has_value());
    return ack && ack->ok ? job.job_id : std::string();
  }

  proto::CreateActorMsg ActorRunning(const std::string& job, const std::string& hash) {
    proto::CreateActorMsg m;
    m.request_id = peer_->NextId();
    m.reply_to = peer_->address();
    m.spec.actor_id = UniqueId::Random().Binary();
    m.spec.job_id = job;
    m.spec.factory = "Counter::Create";
    m.spec.owner = peer_->address();
    m.spec.options.resources = {{"CPU", 1}};
    m.spec.argv = payload_;
    m.spec.binary_hash = hash;
    return m;
  }

  // A normal driver is still served.
  void ExpectADriverIsServed() {
    orrery::Config c;
    c.address = head_;
    orrery::Init(c);
    EXPECT_EQ(*orrery::Get(orrery::Task(Add).Remote(1, 2), 30000), 3);
    auto counter = orrery::Actor(Counter::Create).Remote(40);
    EXPECT_EQ(*orrery::Get(counter.Task(&Counter::Inc).Remote(2), 30000), 42);
    orrery::Shutdown();
  }

  std::unique_ptr<orrery_cluster::Cluster> cluster_;
  std::unique_ptr<Peer> peer_;
  std::string head_, node_id_, node_address_, victim_;
  std::vector<std::string> payload_;
};

// A CreateActor whose argv is a shell command: refused by the head for a job that is not
// registered or that registered another executable; for a job that registered the shell's
// path without a hash, placed, but the node runs nothing a hash does not name.
TEST_F(ExecPolicyTest, CreateActorWithAShellCommandRunsNothing) {
  auto unregistered = ActorRunning(UniqueId::Random().Binary(), "");
  peer_->Send(head_, MsgType::kCreateActor, unregistered);
  auto ack = peer_->WaitAck(unregistered.request_id);
  ASSERT_TRUE(ack);
  EXPECT_FALSE(ack->ok);
  EXPECT_NE(ack->message.find("not registered"), std::string::npos) << ack->message;

  std::string other = RegisterJob("/usr/bin/some-driver", "");
  ASSERT_FALSE(other.empty());
  auto mismatch = ActorRunning(other, orrery::HashFile("/bin/sh"));
  peer_->Send(head_, MsgType::kCreateActor, mismatch);
  ack = peer_->WaitAck(mismatch.request_id);
  ASSERT_TRUE(ack);
  EXPECT_FALSE(ack->ok);
  EXPECT_NE(ack->message.find("is not the one job"), std::string::npos) << ack->message;

  std::string shell_job = RegisterJob("/bin/sh", "");
  ASSERT_FALSE(shell_job.empty());
  auto placed = ActorRunning(shell_job, "");
  peer_->Send(head_, MsgType::kCreateActor, placed);
  ack = peer_->WaitAck(placed.request_id);
  ASSERT_TRUE(ack && ack->ok);
  // The node refuses it: the actor dies with the node's reason.
  std::optional<proto::ActorUpdateMsg> state;
  ASSERT_TRUE(WaitFor([&] {
    state = peer_->ActorState(head_, placed.spec.actor_id);
    return state && state->state == int(proto::ActorState::kDead);
  })) << "the actor is not dead";
  EXPECT_NE(state->death_cause.find("names no executable by SHA-256"), std::string::npos)
      << state->death_cause;
  EXPECT_FALSE(std::filesystem::exists(victim_));
  ExpectADriverIsServed();
  EXPECT_FALSE(std::filesystem::exists(victim_));
}

// A StartActor (or a lease grant) sent straight to a node: without a hash, or with the
// hash of a program no job registered (the node asks the head), nothing runs.
TEST_F(ExecPolicyTest, StartActorStraightToANodeRunsNothing) {
  std::string job = RegisterJob("/bin/sh", "");
  for (const std::string& hash :
       {std::string(), orrery::HashFile("/bin/sh"), std::string("../../bin/sh")}) {
    proto::StartActorMsg start;
    start.spec = ActorRunning(job, hash).spec;
    peer_->Send(node_address_, MsgType::kStartActor, start);
    proto::GrantLeaseMsg grant;
    grant.request.request_id = peer_->NextId();
    grant.request.lease_id = UniqueId::Random().Binary();
    grant.request.reply_to = peer_->address();
    grant.request.job_id = job;
    grant.request.argv = payload_;
    grant.request.binary_hash = hash;
    peer_->Send(node_address_, MsgType::kGrantLease, grant);
    auto lease = peer_->WaitLease(grant.request.request_id);
    ASSERT_TRUE(lease) << "the node did not answer the lease";
    EXPECT_FALSE(lease->ok);
  }
  // Three actor refusals and three lease refusals; at least the first is in the log.
  ASSERT_TRUE(
      WaitFor([&] { return NodeLog().find("refused to start a worker") != std::string::npos; }));
  ASSERT_TRUE(peer_->Ping(node_address_));
  EXPECT_FALSE(std::filesystem::exists(victim_));
  ExpectADriverIsServed();
  EXPECT_FALSE(std::filesystem::exists(victim_));
}

// An executable no registering job asked for is not stored, and a CreateActor naming its
// hash is refused.
TEST_F(ExecPolicyTest, UploadedProgramIsNeitherStoredNorRun) {
  std::string bytes = ReadAll("/bin/sh");
  ASSERT_FALSE(bytes.empty());
  std::string hash = orrery::HashBytes(bytes);
  std::string stored = cluster_->dir() + "/head_binaries/" + hash;
  for (const std::string& job : {std::string(), UniqueId::Random().Binary()}) {
    proto::BinaryMsg put{peer_->NextId(), peer_->address(), hash, "", true, ""};
    put.job_id = job;
    peer_->Send(head_, MsgType::kPutBinary, put, &bytes);
    auto ack = peer_->WaitAck(put.request_id);
    ASSERT_TRUE(ack);
    EXPECT_FALSE(ack->ok);
  }
  EXPECT_FALSE(std::filesystem::exists(stored));
  // A job that registered another executable cannot name this one; work without a job (as
  // a worker submits it) can name only an executable some job registered.
  std::string job = RegisterJob("/usr/bin/some-driver", "");
  for (const std::string& j : {job, std::string(UniqueId::kSize, '\0')}) {
    auto m = ActorRunning(j, hash);
    peer_->Send(head_, MsgType::kCreateActor, m);
    auto ack = peer_->WaitAck(m.request_id);
    ASSERT_TRUE(ack);
    EXPECT_FALSE(ack->ok) << "job " << Hex(j);
  }
  EXPECT_FALSE(std::filesystem::exists(stored));
  ExpectADriverIsServed();
  EXPECT_FALSE(std::filesystem::exists(victim_));
}

// A goodbye (or a heartbeat, or a worker event) for a node that does not carry that node's
// secret is dropped: the node stays alive and keeps serving.
TEST_F(ExecPolicyTest, SpoofedNodeGoodbyeIsDropped) {
  proto::RegisterNodeMsg bye;
  bye.node.node_id = node_id_;
  bye.node.address = node_address_;
  bye.node.alive = false;
  bye.reply_to = peer_->address();
  for (const std::string& secret : {std::string(), std::string("a guess at the node's secret")}) {
    bye.node_secret = secret;
    peer_->Send(head_, MsgType::kRegisterNode, bye);
  }
  // A worker event in the node's name, too.
  proto::WorkerEventMsg ev;
  ev.kind = int(proto::WorkerEventKind::kLeaseWorkerDied);
  ev.node_id = node_id_;
  ev.lease_id = UniqueId::Random().Binary();
  ev.node_secret = "a guess at the node's secret";
  peer_->Send(head_, MsgType::kWorkerEvent, ev);
  // Answered on the same connection after the goodbyes: the head has handled them.
  auto info = peer_->ClusterInfo(head_);
  ASSERT_TRUE(info && info->nodes.size() == 1);
  EXPECT_TRUE(info->nodes[0].alive) << "a spoofed goodbye marked the node dead";
  EXPECT_NE(HeadLog().find("did not come from that node"), std::string::npos);
  ExpectADriverIsServed();
  info = peer_->ClusterInfo(head_);
  ASSERT_TRUE(info && info->nodes.size() == 1);
  EXPECT_TRUE(info->nodes[0].alive);
}

// A PENDING actor record written into Redis that names an executable its job did not
// register (or a job the head never stored) is skipped when the head restarts.
TEST_F(ExecPolicyTest, ForeignPendingActorInRedisIsNotRunAfterRestart) {
  orrery::Config c;
  c.address = head_;
  orrery::Init(c);  // a real job: its record names this program's SHA-256
  ASSERT_EQ(*orrery::Get(orrery::Task(Add).Remote(1, 2), 30000), 3);
  Redis r(cluster_->redis_address());
  ASSERT_TRUE(r.ok());
  std::map<std::string, std::string> jobs;
  ASSERT_TRUE(WaitFor([&] { return !(jobs = r.HGetAll(kPrefix + "jobs")).empty(); }));
  std::string job_id = UniqueId::FromHex(jobs.begin()->first).Binary();
  std::string template_record;
  {  // a record as the head writes it, to rewrite
    auto a = orrery::Actor(Counter::Create).Remote(1);
    ASSERT_EQ(*orrery::Get(a.Task(&Counter::Inc).Remote(1), 30000), 2);
    ASSERT_TRUE(WaitFor([&] { return !r.HGetAll(kPrefix + "actors").empty(); }));
    template_record = r.HGetAll(kPrefix + "actors").begin()->second;
  }
  cluster_->KillHead();

  std::vector<std::string> foreign;
  for (const std::string& job : {job_id, UniqueId::Random().Binary()}) {
    proto::ActorSpecMsg spec;
    spec.actor_id = UniqueId::Random().Binary();
    spec.job_id = job;
    spec.factory = "Counter::Create";
    spec.options.resources = {{"CPU", 1}};
    spec.argv = payload_;
    spec.binary_hash = orrery::HashFile("/bin/sh");
    std::string packed = orrery::internal::Pack(spec), hex;
    for (unsigned char ch : packed) {
      hex.push_back("0123456789abcdef"[ch >> 4]);
      hex.push_back("0123456789abcdef"[ch & 15]);
    }
    // The head's own record of an actor, rewritten: another actor, PENDING, not placed,
    // whose spec (hex msgpack) runs a shell command.
    nlohmann::json j = nlohmann::json::parse(template_record);
    j["actor_id"] = Hex(spec.actor_id);
    j["job_id"] = Hex(job);
    j["state"] = "PENDING";
    j["node_id"] = "";
    j["address"] = "";
    j["pid"] = 0;
    j["spec"] = hex;
    std::string record = j.dump();
    r.Strings({"HSET", kPrefix + "actors", Hex(spec.actor_id), record});
    foreign.push_back(spec.actor_id);
  }
  cluster_->StartHead(0.2, 5);
  for (const auto& id : foreign) {
    auto state = peer_->ActorState(head_, id);
    ASSERT_TRUE(state) << "the restarted head does not answer";
    EXPECT_EQ(state->state, int(proto::ActorState::kDead)) << "a foreign actor record was restored";
  }
  std::string log = ReadAll(cluster_->dir() + "/head.1.log");
  EXPECT_NE(log.find("skipping actor record"), std::string::npos) << log;
  // The real driver is still served by the restarted head.
  EXPECT_EQ(*orrery::Get(orrery::Task(Add).Remote(2, 3), 30000), 5);
  orrery::Shutdown();
  EXPECT_FALSE(std::filesystem::exists(victim_));
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
