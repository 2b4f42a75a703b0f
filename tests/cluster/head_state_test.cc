// The head and the cluster state under hostile input and faults: a real redis-server and
// `orrery head` daemon on loopback, this binary as a peer speaking the wire protocol
// directly (so what the head gets is exactly what a hostile or buggy peer sends) and, for
// the lease test, as a driver through the public API.
//   - strings that are not UTF-8 (actor names, namespaces, resource names, node labels, a
//     driver's path) never crash the head, and Redis only ever holds valid JSON;
//   - a Redis outage under churn loses no write: afterwards Redis matches the head, and a
//     head restarted from it brings back no ghost;
//   - a head restart forgets neither a granted task lease nor which metrics-stream entries
//     were appended, and a lease request lost with a head that died is asked for again.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "core/internal/protocol.h"
#include "core/internal/transport.h"
#include "orrery/ids.h"
#include "orrery/orrery.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/cluster/redis_client.h"
#include "tests/skip_exit_code.h"

using nlohmann::json;
using orrery::UniqueId;
using orrery::proto::MsgType;
using orrery_cluster::Redis;
using orrery_cluster::WaitFor;
namespace proto = orrery::proto;
namespace transport = orrery::transport;

namespace {

const std::string kPrefix = "orrery:default:";

// Every test here starts its own cluster and runtime. One that stops early (a failed ASSERT,
// a Get that timed out) skips its orrery::Shutdown(), and each later test would then fail at
// orrery::Init() ("already called") instead of running: each ends with the runtime shut down.
class ShutdownAfterEachTest : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo&) override {
    if (orrery::IsInitialized()) orrery::Shutdown();
  }
};
const bool kShutdownAfterEachTest = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new ShutdownAfterEachTest);
  return true;
}();

// Blocks until `path` exists: holds its lease for as long as the test wants.
int HoldUntil(std::string path) {
  while (!std::filesystem::exists(path)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return 7;
}
class Counter {
 public:
  static Counter* Create(int start) { return new Counter{start}; }
  int Inc(int by) { return value += by; }
  int value = 0;
};
// An actor whose constructor says it started (`dir`/started), waits for `dir`/open, and says
// it is done (`dir`/constructed) just before it returns.
class Gated {
 public:
  static Gated* Create(std::string dir) {
    std::ofstream(dir + "/started").close();
    while (!std::filesystem::exists(dir + "/open"))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::ofstream(dir + "/constructed").close();
    return new Gated;
  }
  int Ping() { return 1; }
};
ORRERY_REMOTE(HoldUntil, Counter::Create, &Counter::Inc, Gated::Create, &Gated::Ping);

// A peer of the head: an inbox of its own that collects the head's answers.
class Peer {
 public:
  explicit Peer(const std::string& head) : head_("tcp://" + head) {
    EXPECT_TRUE(inbox_.Bind("127.0.0.1").ok());
    inbox_.Start([this](transport::Envelope& env) { OnMessage(env); }, "test-peer");
  }
  ~Peer() { inbox_.Stop(); }
  const std::string& address() const { return inbox_.address(); }

  template <typename T>
  void Send(MsgType type, const T& msg) {
    transport::Send(head_, type, msg);
  }

  std::optional<proto::AckMsg> WaitAck(uint64_t request_id, int timeout_ms = 10000) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return acks_.count(request_id) > 0; })) {
      return std::nullopt;
    }
    return acks_[request_id];
  }

  // Asks the head for its nodes; nullopt when it does not answer (it is dead).
  std::optional<proto::ClusterInfoMsg> ClusterInfo(int timeout_ms = 5000) {
    uint64_t id = next_id_++;
    Send(MsgType::kGetClusterInfo, proto::ClusterInfoMsg{id, address(), {}});
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return infos_.count(id) > 0; })) {
      return std::nullopt;
    }
    return infos_[id];
  }

  // The head's view of an actor (SubscribeActor); nullopt when it does not answer.
  std::optional<proto::ActorUpdateMsg> ActorState(const std::string& actor_id,
                                                  int timeout_ms = 5000) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      updates_.erase(actor_id);
    }
    Send(MsgType::kSubscribeActor, proto::SubscribeActorMsg{actor_id, address()});
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return updates_.count(actor_id) > 0; })) {
      return std::nullopt;
    }
    return updates_[actor_id];
  }

  uint64_t NextId() { return next_id_++; }

  // Creates an actor that can never be placed (it needs a resource no node has), so it
  // stays PENDING, without a process, until killed. Returns the Ack.
  std::optional<proto::AckMsg> CreateActor(const std::string& actor_id, const std::string& name,
                                           const std::string& namespace_,
                                           const orrery::Resources& resources = {
                                               {"Unobtainium", 1}}) {
    proto::CreateActorMsg m;
    m.request_id = NextId();
    m.reply_to = address();
    m.spec.actor_id = actor_id;
    // No job: as an actor a worker creates (which runs the node's own worker program).
    m.spec.job_id = std::string(UniqueId::kSize, '\0');
    m.spec.factory = "Nothing::Create";
    m.spec.owner = address();
    m.spec.infeasible_timeout_s = -1;
    m.spec.options.name = name;
    m.spec.options.namespace_ = namespace_;
    m.spec.options.resources = resources;
    Send(MsgType::kCreateActor, m);
    return WaitAck(m.request_id);
  }

 private:
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
    }
    cv_.notify_all();
  }

  std::string head_;
  transport::Inbox inbox_;
  std::atomic<uint64_t> next_id_{1};
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, proto::AckMsg> acks_;
  std::map<uint64_t, proto::ClusterInfoMsg> infos_;
  std::map<std::string, proto::ActorUpdateMsg> updates_;
};

std::string Hex(const std::string& binary) { return UniqueId::FromBinary(binary).Hex(); }

// Every record of every hash under the cluster's prefix must be valid JSON (which is UTF-8).
void ExpectRedisHoldsValidJson(Redis& r) {
  for (const auto& key : r.Strings({"KEYS", kPrefix + "*"})) {
    if (r.Type(key) != "hash") continue;
    for (const auto& [field, value] : r.HGetAll(key)) {
      EXPECT_FALSE(json::parse(value, nullptr, false).is_discarded())
          << key << "[" << field << "] is not JSON: " << value;
    }
  }
}

bool HeadAlive(orrery_cluster::Cluster& c) { return kill(c.head_pid(), 0) == 0; }

// ------------------------------------------------------------------ strings that are not UTF-8

TEST(HeadStateTest, StringsThatAreNotUtf8NeverCrashTheHead) {
  orrery_cluster::Cluster cluster;
  cluster.StartHead(0.2, 3);
  cluster.AddNode("", "zone=a", 1);
  Peer peer(cluster.head_address());
  ASSERT_TRUE(WaitFor([&] {
    auto info = peer.ClusterInfo();
    return info && info->nodes.size() == 1;
  }));

  // Names, namespaces and resource names are refused with a clear error.
  struct Case {
    std::string what, name, namespace_;
    orrery::Resources resources;
  };
  for (const Case& c : {Case{"name", "z\xe4hler", "", {{"Unobtainium", 1}}},
                        Case{"namespace", "counter", "n\xe4me", {{"Unobtainium", 1}}},
                        Case{"resource name", "", "", {{"gr\xfcn", 1}}}}) {
    auto ack = peer.CreateActor(UniqueId::Random().Binary(), c.name, c.namespace_, c.resources);
    ASSERT_TRUE(ack) << "the head did not answer a create with a non-UTF-8 " << c.what;
    EXPECT_FALSE(ack->ok) << c.what;
    EXPECT_NE(ack->message.find("UTF-8"), std::string::npos) << ack->message;
  }

  // A node whose label value is not UTF-8 is refused.
  proto::RegisterNodeMsg node;
  node.node.node_id = UniqueId::Random().Binary();
  node.node.address = "tcp://127.0.0.1:1";
  node.node.alive = true;
  node.node.total = {{"CPU", 2}};
  node.node.available = node.node.total;
  node.node.labels = {{"region",
                       "s\xfc"
                       "d"}};
  node.reply_to = peer.address();
  node.node_secret = "a secret of this test's node";
  peer.Send(MsgType::kRegisterNode, node);
  auto refused = peer.WaitAck(0);
  ASSERT_TRUE(refused) << "the head did not answer a node with a non-UTF-8 label";
  EXPECT_FALSE(refused->ok);

  // A driver in a directory whose name is not UTF-8 registers, then dies without its
  // goodbye: the head ends its job (after the heartbeat timeout) and writes its record.
  proto::JobMsg job;
  job.request_id = peer.NextId();
  job.reply_to = peer.address();
  job.job_id = UniqueId::Random().Binary();
  job.driver_address = peer.address();
  job.pid = 1;
  job.entrypoint =
      "/tmp/pr\xfc"
      "fung/driver";
  job.alive = true;
  peer.Send(MsgType::kRegisterJob, job);
  auto registered = peer.WaitAck(job.request_id);
  ASSERT_TRUE(registered);
  EXPECT_TRUE(registered->ok) << registered->message;

  Redis r(cluster.redis_address());
  ASSERT_TRUE(r.ok());
  std::string job_hex = Hex(job.job_id);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto rec = json::parse(r.HGet(kPrefix + "jobs", job_hex), nullptr, false);
        return rec.is_object() && rec.value("state", "") == "FINISHED";
      },
      30000))
      << "the silent driver's job did not end";
  auto rec = json::parse(r.HGet(kPrefix + "jobs", job_hex));
  EXPECT_EQ(rec["entrypoint"], "/tmp/pr\\xfcfung/driver");

  // The head survived all of it and still serves.
  EXPECT_TRUE(HeadAlive(cluster));
  auto info = peer.ClusterInfo();
  ASSERT_TRUE(info) << "the head stopped answering";
  EXPECT_EQ(info->nodes.size(), 1u) << "the node with a non-UTF-8 label must not be registered";
  auto ok = peer.CreateActor(UniqueId::Random().Binary(), "z\xc3\xa4hler", "");  // UTF-8: accepted
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->ok) << ok->message;
  ExpectRedisHoldsValidJson(r);
}

// ------------------------------------------------------------------ records read back

std::string ToHex(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(d[c >> 4]);
    out.push_back(d[c & 15]);
  }
  return out;
}

TEST(HeadStateTest, HostileRecordsInRedisAreSkippedOnRestart) {
  orrery_cluster::Cluster cluster;
  cluster.StartHead(0.2, 3);
  Peer before(cluster.head_address());
  std::string good = UniqueId::Random().Binary();
  auto ack = before.CreateActor(good, "survivor", "");
  ASSERT_TRUE(ack && ack->ok);
  Redis r(cluster.redis_address());
  ASSERT_TRUE(WaitFor([&] { return !r.HGet(kPrefix + "actors", Hex(good)).empty(); }));
  cluster.KillHead();

  // A pending actor whose spec (hex msgpack, so the JSON is valid) names a class that is
  // not UTF-8: restored blindly, the head would write it back and throw.
  proto::ActorSpecMsg spec;
  spec.actor_id = UniqueId::Random().Binary();
  spec.job_id = UniqueId::Random().Binary();
  spec.factory = "Z\xe4hler::Create";
  spec.options.resources = {{"Unobtainium", 1}};
  json bad_spec = json::parse(r.HGet(kPrefix + "actors", Hex(good)));
  bad_spec["actor_id"] = Hex(spec.actor_id);
  bad_spec["spec"] = ToHex(orrery::internal::Pack(spec));
  std::string bad_id = UniqueId::Random().Hex();
  std::vector<std::pair<std::string, std::string>> hostile = {
      {"actors", bad_spec.dump()},
      {"actors", "{not json"},
      {"actors", "{\"actor_id\": 5, \"spec\": [1, 2]}"},
      {"actors", "{\"spec\": \"9\"}"},
      {"nodes", "{\"node_id\": \"" + bad_id + "\", \"total\": {\"CPU\": \"many\"}}"},
      {"nodes", "\"z\xe4hler\""},
      {"placement_groups", "{\"spec\": \"c0\", \"state\": \"CREATED\"}"},
      {"jobs", "{\"job_id\": \"nope\"}"},
      {"leases", "{\"request\": \"zz\"}"},
  };
  int n = 0;
  for (const auto& [table, value] : hostile) {
    std::string key = table == "actors" && n == 0 ? Hex(spec.actor_id) : UniqueId::Random().Hex();
    r.Strings({"HSET", kPrefix + table, key, value});
    ++n;
  }
  // A well-formed record filed under a key that is not its id: no head wrote it.
  std::string misfiled = UniqueId::Random().Binary();
  proto::ActorSpecMsg misfiled_spec;
  misfiled_spec.actor_id = misfiled;
  misfiled_spec.job_id = UniqueId::Random().Binary();
  misfiled_spec.factory = "Counter::Create";
  json misfiled_record = json::parse(r.HGet(kPrefix + "actors", Hex(good)));
  misfiled_record["actor_id"] = Hex(misfiled);
  misfiled_record["spec"] = ToHex(orrery::internal::Pack(misfiled_spec));
  r.Strings({"HSET", kPrefix + "actors", UniqueId::Random().Hex(), misfiled_record.dump()});

  cluster.StartHead(0.2, 3);  // throws when the head does not come up
  Peer after(cluster.head_address());
  auto survivor = after.ActorState(good);
  ASSERT_TRUE(survivor) << "the restarted head does not answer";
  EXPECT_EQ(survivor->state, int(proto::ActorState::kPending))
      << "the good record was not restored";
  auto skipped = after.ActorState(spec.actor_id);
  ASSERT_TRUE(skipped);
  EXPECT_EQ(skipped->state, int(proto::ActorState::kDead))
      << "the record with a non-UTF-8 class was restored";
  auto misfiled_state = after.ActorState(misfiled);
  ASSERT_TRUE(misfiled_state);
  EXPECT_EQ(misfiled_state->state, int(proto::ActorState::kDead))
      << "the record filed under another id was restored";
  // Still serving after several scheduling ticks.
  ASSERT_TRUE(
      WaitFor([&] { return after.CreateActor(UniqueId::Random().Binary(), "", "").has_value(); }));
  EXPECT_TRUE(HeadAlive(cluster));
  // The restarted head logs to head.1.log (the fixture keeps each start's log).
  std::string text;
  for (const auto& entry : std::filesystem::directory_iterator(cluster.dir())) {
    if (entry.path().filename().string().rfind("head", 0) != 0) continue;
    std::ifstream log(entry.path());
    text.append(std::istreambuf_iterator<char>(log), std::istreambuf_iterator<char>());
  }
  EXPECT_NE(text.find("skipping an unreadable"), std::string::npos);
  EXPECT_NE(text.find("skipping an actor record filed under another id"), std::string::npos);
}

// ------------------------------------------------------------------ Redis's password

// The cluster's Redis has a password: a client without it, or with a wrong one, reads and
// writes nothing, so it cannot plant a record for the next head restart; the head, which
// has it, keeps writing.
TEST(HeadStateTest, RedisRefusesClientsWithoutThePassword) {
  orrery_cluster::Cluster cluster;
  cluster.StartHead(0.2, 3);
  int port = std::atoi(cluster.redis_address().c_str() + cluster.redis_address().rfind(':') + 1);
  Redis owner(port);
  ASSERT_TRUE(owner.ok());
  ASSERT_EQ(owner.auth_error(), "");
  cluster.AddNode("", "", 1);
  ASSERT_TRUE(WaitFor([&] { return !owner.HGetAll(kPrefix + "nodes").empty(); }));

  Redis stranger(port, "");
  ASSERT_TRUE(stranger.ok());
  EXPECT_EQ(stranger.Error({"HGETALL", kPrefix + "nodes"}).rfind("NOAUTH", 0), 0u);
  EXPECT_TRUE(stranger.HGetAll(kPrefix + "nodes").empty());
  EXPECT_TRUE(stranger.Strings({"KEYS", "*"}).empty());
  std::string refused =
      stranger.Error({"HSET", kPrefix + "actors", UniqueId::Random().Hex(), "{}"});
  EXPECT_EQ(refused.rfind("NOAUTH", 0), 0u) << refused;

  Redis wrong(port, "not-the-password");
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong.auth_error().rfind("WRONGPASS", 0), 0u) << wrong.auth_error();
  EXPECT_TRUE(wrong.HGetAll(kPrefix + "nodes").empty());
  EXPECT_TRUE(owner.HGetAll(kPrefix + "actors").empty()) << "a stranger's write reached Redis";

  // The password is in a 0600 file and on no command line (redis-server's included).
  struct stat st {};
  ASSERT_EQ(stat(cluster.redis_password_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string password = Redis::PasswordFromEnvironment();
  ASSERT_GE(password.size(), 32u);
  for (int pid : {cluster.redis_pid(), cluster.head_pid()}) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_FALSE(cmdline.empty());
    EXPECT_EQ(cmdline.find(password), std::string::npos) << "pid " << pid;
  }
  EXPECT_TRUE(HeadAlive(cluster));
}

// ------------------------------------------------------------------ a Redis outage

// Actors created and killed by the churn, and what each one's record must say.
struct Churn {
  std::map<std::string, std::string> state;  // hex -> PENDING / DEAD
  std::vector<std::string> live;             // binary ids, oldest first

  void Step(Peer& peer) {
    for (int i = 0; i < 2; ++i) {
      std::string id = UniqueId::Random().Binary();
      auto ack = peer.CreateActor(id, "", "");
      ASSERT_TRUE(ack && ack->ok);
      state[Hex(id)] = "PENDING";
      live.push_back(id);
    }
    std::string victim = live.front();
    live.erase(live.begin());
    peer.Send(MsgType::kKillActor, proto::KillActorMsg{victim, true});
    state[Hex(victim)] = "DEAD";
  }
  void RunFor(Peer& peer, double seconds) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(int(seconds * 1000));
    while (std::chrono::steady_clock::now() < end) {
      Step(peer);
      std::this_thread::sleep_for(std::chrono::milliseconds(30));  // pacing of the load, not a wait
    }
  }
  // Redis holds exactly these actors in these states, and exactly the live ones pending.
  bool RedisMatches(Redis& r) const {
    auto actors = r.HGetAll(kPrefix + "actors");
    if (actors.size() != state.size()) return false;
    for (const auto& [hex, want] : state) {
      auto it = actors.find(hex);
      if (it == actors.end()) return false;
      auto rec = json::parse(it->second, nullptr, false);
      if (!rec.is_object() || rec.value("state", "") != want) return false;
    }
    auto pending = r.HGetAll(kPrefix + "pending");
    if (pending.size() != live.size()) return false;
    for (const auto& id : live)
      if (!pending.count(Hex(id))) return false;
    return true;
  }
  std::string Mismatch(Redis& r) const {
    auto actors = r.HGetAll(kPrefix + "actors");
    int missing = 0, stale = 0;
    for (const auto& [hex, want] : state) {
      auto it = actors.find(hex);
      if (it == actors.end()) {
        ++missing;
      } else if (json::parse(it->second, nullptr, false).value("state", "") != want) {
        ++stale;
      }
    }
    return std::to_string(missing) + " actor records missing, " + std::to_string(stale) +
           " stale, " + std::to_string(actors.size()) + " in Redis for " +
           std::to_string(state.size()) + " actors";
  }
};

TEST(HeadStateTest, RedisOutageUnderChurnLosesNoWriteAndLeavesNoGhost) {
  orrery_cluster::Cluster cluster;
  cluster.StartHead(0.2, 3);
  Peer peer(cluster.head_address());
  Churn churn;
  churn.RunFor(peer, 1.0);
  {
    Redis r(cluster.redis_address());
    ASSERT_TRUE(WaitFor([&] { return churn.RedisMatches(r); })) << churn.Mismatch(r);
  }

  // 15 s without Redis (restarted with its data directory), churn all along.
  cluster.KillRedis();
  churn.RunFor(peer, 15.0);
  cluster.RestartRedis(/*empty=*/false);
  churn.RunFor(peer, 1.0);
  {
    Redis r(cluster.redis_address());
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(WaitFor([&] { return churn.RedisMatches(r); }, 30000))
        << "after an outage with Redis's data kept: " << churn.Mismatch(r);
  }

  // A shorter outage after which Redis comes back empty: the head writes everything again.
  cluster.KillRedis();
  churn.RunFor(peer, 2.0);
  cluster.RestartRedis(/*empty=*/true);
  {
    Redis r(cluster.redis_address());
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(WaitFor([&] { return churn.RedisMatches(r); }, 30000))
        << "after Redis came back empty: " << churn.Mismatch(r);
    ExpectRedisHoldsValidJson(r);
  }

  // A head restarted from Redis knows every killed actor as dead: no ghost.
  ASSERT_TRUE(HeadAlive(cluster));
  cluster.KillHead();
  cluster.StartHead(0.2, 3);
  Peer after(cluster.head_address());
  int ghosts = 0, lost = 0;
  for (const auto& [hex, want] : churn.state) {
    auto u = after.ActorState(UniqueId::FromHex(hex).Binary());
    ASSERT_TRUE(u) << "the restarted head does not answer";
    bool dead = u->state == int(proto::ActorState::kDead);
    if (want == "DEAD" && !dead) ++ghosts;
    if (want != "DEAD" && dead) ++lost;
  }
  EXPECT_EQ(ghosts, 0) << "killed actors came back as live after the head restart";
  EXPECT_EQ(lost, 0) << "live actors were forgotten by the head restart";
}

// ------------------------------------------------------------------ what a head restart keeps

// Starts the head and one node of one CPU, and this process as their driver.
void StartOneCpuCluster(orrery_cluster::Cluster& cluster) {
  cluster.StartHead(0.2, 3);
  cluster.AddNode("", "", 1);
  orrery::Config c;
  c.address = cluster.head_address();
  orrery::Init(c);
  ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == 1; }));
}

TEST(HeadStateTest, HeadRestartKeepsGrantedLeases) {
  orrery_cluster::Cluster cluster;
  ASSERT_NO_FATAL_FAILURE(StartOneCpuCluster(cluster));
  std::string release = cluster.dir() + "/release";
  auto held = orrery::Task(HoldUntil).Remote(release);
  ASSERT_TRUE(WaitFor([] { return orrery::AvailableResources()["CPU"] == 0; }))
      << "the task never took the CPU";
  {
    Redis r(cluster.redis_address());
    // Granted in Redis, not only pending: the head writes the pending record first, and a
    // head killed before the granted one lands restores a lease that waits again.
    EXPECT_TRUE(WaitFor([&] {
      auto leases = r.HGetAll(kPrefix + "leases");
      if (leases.size() != 1) return false;
      auto record = json::parse(leases.begin()->second, nullptr, false);
      return record.is_object() && !record.value("node_id", "").empty();
    })) << "the granted lease is not in Redis";
  }

  cluster.KillHead();
  cluster.StartHead(0.2, 3);
  ASSERT_TRUE(WaitFor([] {
    auto nodes = orrery::Nodes();
    return nodes.size() == 1 && nodes[0].alive;
  }));
  // The task still runs on its lease: the restarted head must not offer its CPU again.
  EXPECT_EQ(orrery::AvailableResources()["CPU"], 0)
      << "the restarted head forgot the granted lease";

  std::ofstream(release).close();
  EXPECT_EQ(*orrery::Get(held, 30000), 7);
  // Returned (when idle) to the restarted head, the lease gives its CPU back.
  EXPECT_TRUE(WaitFor([] { return orrery::AvailableResources()["CPU"] == 1; }, 30000));
  Redis r(cluster.redis_address());
  EXPECT_TRUE(WaitFor([&] { return r.HGetAll(kPrefix + "leases").empty(); }))
      << "the returned lease stayed in Redis";
  orrery::Shutdown();
}

// The bytes waiting unread in the stopped head's sockets for the connections of process
// `pid` (this one by default) to `head` (host:port): what it sent that the head's kernel
// holds for it.
long UnreadByTheHead(const std::string& head, const std::string& pid = "self") {
  int port = std::stoi(head.substr(head.rfind(':') + 1));
  std::set<std::string> own;  // the process's socket inodes
  for (const auto& fd : std::filesystem::directory_iterator("/proc/" + pid + "/fd")) {
    std::error_code ec;
    std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0) own.insert(target.substr(8, target.size() - 9));
  }
  struct Row {
    int local, remote;
    long rx;
    std::string inode;
  };
  std::vector<Row> rows;
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // the header
  while (std::getline(tcp, line)) {
    std::istringstream in(line);
    std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
    in >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
    auto port_of = [](const std::string& a) { return std::stoi(a.substr(a.find(':') + 1), 0, 16); };
    rows.push_back({port_of(local), port_of(remote),
                    std::stol(queues.substr(queues.find(':') + 1), nullptr, 16), inode});
  }
  std::set<int> ours;  // the process's ports of its connections to the head
  for (const auto& r : rows)
    if (r.remote == port && own.count(r.inode)) ours.insert(r.local);
  long unread = 0;
  for (const auto& r : rows)
    if (r.local == port && ours.count(r.remote)) unread += r.rx;
  return unread;
}

// Stops the head, runs `submit` (which sends the head something), waits until that has
// reached the stopped head's socket, then kills the head unread and starts another. Over
// TCP, whose queues /proc/net/tcp shows (the same-host channel's Unix sockets do not).
template <typename Submit>
void LoseToTheHead(orrery_cluster::Cluster& cluster, Submit submit) {
  ASSERT_TRUE(orrery_cluster::StopProcess(cluster.head_pid()));
  long before = UnreadByTheHead(cluster.head_address());
  submit();
  EXPECT_TRUE(WaitFor([&] { return UnreadByTheHead(cluster.head_address()) > before; }))
      << "nothing reached the head's socket";
  cluster.KillHead();
  cluster.StartHead(0.2, 3);
}

struct OverTcp {
  OverTcp() { setenv("ORRERY_LOCAL_CHANNEL", "0", 1); }
  ~OverTcp() { unsetenv("ORRERY_LOCAL_CHANNEL"); }
};

// A task submitted as the head stops: its lease request dies unread with the head. The
// driver asks again, and the restarted head runs the task.
TEST(HeadStateTest, ALeaseRequestLostWithTheHeadIsAskedForAgain) {
  OverTcp tcp;
  orrery_cluster::Cluster cluster;
  ASSERT_NO_FATAL_FAILURE(StartOneCpuCluster(cluster));
  std::string release = cluster.dir() + "/release";
  std::ofstream(release).close();
  std::optional<orrery::ObjectRef<int>> task;
  LoseToTheHead(cluster, [&] { task = orrery::Task(HoldUntil).Remote(release); });
  EXPECT_EQ(*orrery::Get(*task, 30000), 7);
  orrery::Shutdown();
}

// A lease granted just as the head stops: the node, told to start a worker for it, asks the
// head to vouch for the driver's executable, and that question dies unread with the head.
// The node asks again and the restarted head answers, so the task runs (the node used to
// wait 120 s for the answer, and the task with it).
TEST(HeadStateTest, ALeaseGrantedAsTheHeadStopsRunsOnceItRestarts) {
  OverTcp tcp;
  orrery_cluster::Cluster cluster;
  // Health checks slow enough that the node, stopped below, is never suspected meanwhile
  // (the head would hold the lease back from it).
  cluster.StartHead(1.0, 30);
  int node = cluster.AddNode("", "", 1);
  orrery::Config c;
  c.address = cluster.head_address();
  orrery::Init(c);
  ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == 1; }));
  std::string release = cluster.dir() + "/release";
  std::ofstream(release).close();
  // The grant waits in the stopped node's socket while the head stops in turn.
  ASSERT_TRUE(orrery_cluster::StopProcess(node));
  auto task = orrery::Task(HoldUntil).Remote(release);
  {
    Redis r(cluster.redis_address());
    ASSERT_TRUE(WaitFor([&] {
      auto leases = r.HGetAll(kPrefix + "leases");
      if (leases.size() != 1) return false;
      auto record = json::parse(leases.begin()->second, nullptr, false);
      return record.is_object() && !record.value("node_id", "").empty();
    })) << "the head never granted the lease";
  }
  ASSERT_TRUE(orrery_cluster::StopProcess(cluster.head_pid()));
  long before = UnreadByTheHead(cluster.head_address(), std::to_string(node));
  ASSERT_EQ(kill(node, SIGCONT), 0);
  EXPECT_TRUE(WaitFor([&] {
    return UnreadByTheHead(cluster.head_address(), std::to_string(node)) > before;
  })) << "the node sent the head nothing";
  cluster.KillHead();
  cluster.StartHead(1.0, 30);  // as before: the node heartbeats at the first head's period
  EXPECT_EQ(*orrery::Get(task, 30000), 7);
  orrery::Shutdown();
}

// An actor created as the head stops: its creation dies unread with the head. The driver
// sends it again until the head acknowledges it, and the actor answers.
TEST(HeadStateTest, AnActorCreationLostWithTheHeadIsSentAgain) {
  OverTcp tcp;
  orrery_cluster::Cluster cluster;
  ASSERT_NO_FATAL_FAILURE(StartOneCpuCluster(cluster));
  std::optional<orrery::ActorHandle<Counter>> counter;
  LoseToTheHead(cluster, [&] { counter = orrery::Actor(Counter::Create).Remote(40); });
  EXPECT_EQ(*orrery::Get(counter->Task(&Counter::Inc).Remote(2), 30000), 42);
  orrery::Shutdown();
}

// An actor's worker starts while the head is stopped: the node's report that it is alive
// dies with the head (unread, or dropped by the restarted head before the node's next
// heartbeat). The node sends it again until acknowledged, and the actor answers.
TEST(HeadStateTest, AnActorStartReportedAsTheHeadStopsIsReportedAgain) {
  orrery_cluster::Cluster cluster;
  ASSERT_NO_FATAL_FAILURE(StartOneCpuCluster(cluster));
  const std::string& dir = cluster.dir();
  auto gated = orrery::Actor(Gated::Create).Remote(dir);
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(dir + "/started"); }));
  ASSERT_TRUE(orrery_cluster::StopProcess(cluster.head_pid()));
  std::ofstream(dir + "/open").close();
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(dir + "/constructed"); }));
  cluster.KillHead();
  cluster.StartHead(0.2, 3);
  EXPECT_EQ(*orrery::Get(gated.Task(&Gated::Ping).Remote(), 30000), 1);
  orrery::Shutdown();
}

// An actor's worker starts while Redis is down: the head takes the node's report (the actor
// answers), but its record still says pending when the head is killed. The node's report is
// acknowledged only once stored, so it reaches the restarted head again, and an actor a
// newcomer looks up is alive, not pending for good.
TEST(HeadStateTest, AnActorStartTheHeadTookButNeverStoredIsReportedAgain) {
  orrery_cluster::Cluster cluster;
  ASSERT_NO_FATAL_FAILURE(StartOneCpuCluster(cluster));
  const std::string& dir = cluster.dir();
  auto gated = orrery::Actor(Gated::Create).Remote(dir);
  std::string id = gated.ID().Binary();
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(dir + "/started"); }));
  {
    Redis r(cluster.redis_address());  // placed, and stored as such
    ASSERT_TRUE(WaitFor([&] {
      auto record = json::parse(r.HGet(kPrefix + "actors", Hex(id)), nullptr, false);
      return record.is_object() && !record.value("node_id", "").empty();
    }));
  }
  cluster.KillRedis();
  std::ofstream(dir + "/open").close();
  EXPECT_EQ(*orrery::Get(gated.Task(&Gated::Ping).Remote(), 30000), 1);
  cluster.KillHead();
  cluster.RestartRedis(/*empty=*/false);
  cluster.StartHead(0.2, 3);
  Peer newcomer(cluster.head_address());
  std::optional<proto::ActorUpdateMsg> seen;
  EXPECT_TRUE(WaitFor([&] {
    seen = newcomer.ActorState(id);
    return seen && seen->state == int(proto::ActorState::kAlive);
  })) << "the restarted head has the actor "
      << (seen ? "in state " + std::to_string(seen->state) : "unknown");
  orrery::Shutdown();
}

// An actor created and started while Redis is down, then the head killed: the restarted
// head never heard of it, and kills its worker as a stray. Its caller's next call must end
// with the actor's death, not wait for good (it did: the head never reports the death of an
// actor it does not know).
TEST(HeadStateTest, AnActorTheRestartedHeadNeverHeardOfDiesForItsCaller) {
  orrery_cluster::Cluster cluster;
  ASSERT_NO_FATAL_FAILURE(StartOneCpuCluster(cluster));
  cluster.KillRedis();
  auto counter = orrery::Actor(Counter::Create).Remote(40);
  EXPECT_EQ(*orrery::Get(counter.Task(&Counter::Inc).Remote(2), 30000), 42);
  cluster.KillHead();
  cluster.RestartRedis(/*empty=*/false);
  cluster.StartHead(0.2, 3);
  // Calls answer until the stray is killed; then one fails.
  std::string died;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (died.empty() && std::chrono::steady_clock::now() < deadline) {
    try {
      orrery::Get(counter.Task(&Counter::Inc).Remote(1), 30000);
    } catch (const orrery::ActorDiedError& e) {
      died = e.what();
    } catch (const orrery::GetTimeoutError& e) {
      FAIL() << "a call to the stray actor hung: " << e.what();
    }
  }
  EXPECT_FALSE(died.empty()) << "the actor never died for its caller";
  orrery::Shutdown();
}

// A lease returned while Redis is down, then the head killed: the restarted head restores
// the lease as held, so its CPU stayed taken until the job ended. The return is acknowledged
// only once stored, so the driver sends it again to the restarted head.
TEST(HeadStateTest, ALeaseReturnTheHeadTookButNeverStoredIsSentAgain) {
  orrery_cluster::Cluster cluster;
  ASSERT_NO_FATAL_FAILURE(StartOneCpuCluster(cluster));
  std::string release = cluster.dir() + "/release";
  auto held = orrery::Task(HoldUntil).Remote(release);
  ASSERT_TRUE(WaitFor([] { return orrery::AvailableResources()["CPU"] == 0; }));
  {
    Redis r(cluster.redis_address());  // granted, and stored as such
    ASSERT_TRUE(WaitFor([&] {
      auto leases = r.HGetAll(kPrefix + "leases");
      if (leases.size() != 1) return false;
      auto record = json::parse(leases.begin()->second, nullptr, false);
      return record.is_object() && !record.value("node_id", "").empty();
    }));
  }
  cluster.KillRedis();
  std::ofstream(release).close();
  EXPECT_EQ(*orrery::Get(held, 30000), 7);
  // The idle lease goes back: the head frees its CPU, but cannot store that.
  ASSERT_TRUE(WaitFor([] { return orrery::AvailableResources()["CPU"] == 1; }));
  cluster.KillHead();
  cluster.RestartRedis(/*empty=*/false);
  cluster.StartHead(0.2, 3);
  EXPECT_TRUE(WaitFor([] {
    auto nodes = orrery::Nodes();
    return nodes.size() == 1 && nodes[0].alive && orrery::AvailableResources()["CPU"] == 1;
  })) << "the restarted head still holds the returned lease's CPU";
  orrery::Shutdown();
}

// A training run's record with metrics entry `index`, as a driver sends it.
proto::RecordMsg RunRecord(Peer& peer, const std::string& run, int64_t index) {
  proto::RecordMsg m;
  m.request_id = peer.NextId();
  m.reply_to = peer.address();
  m.table = "train_runs";
  m.key = run;
  m.json = json{{"id", run}, {"status", "RUNNING"}, {"iterations", index + 1}}.dump();
  m.stream_index = index;
  m.stream_json = json{{"iteration", std::to_string(index + 1)}}.dump();
  return m;
}

// A submitted job whose driver exits while the head is stopped: the node's report of the
// exit dies unread with the head. The node sends it again until acknowledged, so the
// restarted head records the job SUCCEEDED (it stayed RUNNING for good).
TEST(HeadStateTest, AJobThatEndsWhileTheHeadIsDownEndsOnceItRestarts) {
  orrery_cluster::Cluster cluster;
  cluster.StartHead(0.2, 3);
  cluster.AddNode("", "", 1);
  std::string release = cluster.dir() + "/release";
  auto [code, out] = orrery_cluster::RunCli(
      "job submit --no-wait --address " + cluster.head_address() + " -- /bin/sh -c 'while [ ! -e " +
      release + " ]; do sleep 0.05; done'");
  ASSERT_EQ(code, 0) << out;
  std::smatch found;
  ASSERT_TRUE(std::regex_search(out, found, std::regex("job_[0-9a-f]{16}"))) << out;
  std::string id = found.str();
  Redis r(cluster.redis_address());
  json record;
  auto state_is = [&](const std::string& state) {
    record = json::parse(r.HGet(kPrefix + "submissions", id), nullptr, false);
    return record.is_object() && record.value("state", "") == state;
  };
  ASSERT_TRUE(WaitFor([&] { return state_is("RUNNING") && record.value("pid", 0) > 0; }))
      << "job " << id << ": " << record.dump();
  int pid = record.value("pid", 0);

  ASSERT_TRUE(orrery_cluster::StopProcess(cluster.head_pid()));
  std::ofstream(release).close();
  // Reaped by its node, which reports the exit in the same step.
  ASSERT_TRUE(WaitFor([&] { return !std::filesystem::exists("/proc/" + std::to_string(pid)); }))
      << "the driver did not end";
  cluster.KillHead();
  cluster.StartHead(0.2, 3);
  EXPECT_TRUE(WaitFor([&] { return state_is("SUCCEEDED"); }))
      << "the restarted head has the job " << record.dump();
  EXPECT_EQ(record.value("exit_code", -1), 0);
}

TEST(HeadStateTest, HeadRestartAppendsNoStreamEntryTwice) {
  orrery_cluster::Cluster cluster;
  cluster.StartHead(0.2, 3);
  std::string run = UniqueId::Random().Hex();
  auto report = [&](Peer& peer, int64_t index) {
    proto::RecordMsg m = RunRecord(peer, run, index);
    peer.Send(MsgType::kPutRecord, m);
    auto ack = peer.WaitAck(m.request_id);
    ASSERT_TRUE(ack && ack->ok);
  };
  Redis r(cluster.redis_address());
  std::string stream = kPrefix + "train:" + run + ":metrics";
  {
    Peer peer(cluster.head_address());
    report(peer, 0);
    report(peer, 1);
    report(peer, 1);  // resent to the same head
    ASSERT_TRUE(WaitFor([&] { return r.XRange(stream).size() == 2; }));
  }
  cluster.KillHead();
  cluster.StartHead(0.2, 3);
  Peer peer(cluster.head_address());
  report(peer, 1);  // resent across the restart
  report(peer, 2);
  // Entries are written in order: once the third report is in, the resend was handled.
  ASSERT_TRUE(WaitFor([&] {
    auto entries = r.XRange(stream);
    return !entries.empty() && entries.back()["iteration"] == "3";
  })) << "the third report never reached the stream";
  auto entries = r.XRange(stream);
  ASSERT_EQ(entries.size(), 3u) << "a report resent across a head restart was appended twice";
  for (size_t i = 0; i < entries.size(); ++i)
    EXPECT_EQ(entries[i]["iteration"], std::to_string(i + 1));
}

// The head acknowledges a driver's record only once Redis has it: while Redis is away no
// ack comes (the driver keeps the entry to resend), and an entry acknowledged just before
// the head is killed is in Redis after the restart.
TEST(HeadStateTest, RecordsAreAcknowledgedOnlyOnceRedisHasThem) {
  orrery_cluster::Cluster cluster;
  cluster.StartHead(0.2, 3);
  std::string run = UniqueId::Random().Hex();
  std::string stream = kPrefix + "train:" + run + ":metrics";
  {
    Peer peer(cluster.head_address());
    proto::RecordMsg first = RunRecord(peer, run, 0);
    peer.Send(MsgType::kPutRecord, first);
    ASSERT_TRUE(peer.WaitAck(first.request_id)) << "no ack while Redis is up";
    cluster.KillRedis();
    proto::RecordMsg second = RunRecord(peer, run, 1);
    peer.Send(MsgType::kPutRecord, second);
    EXPECT_FALSE(peer.WaitAck(second.request_id, 1500)) << "acknowledged while Redis was down";
    cluster.RestartRedis();
    auto ack = peer.WaitAck(second.request_id, 20000);
    ASSERT_TRUE(ack && ack->ok) << "no ack once Redis was back";
  }
  cluster.KillHead();  // right after the ack: nothing the ack promised may be lost
  Redis after(cluster.redis_address());
  auto entries = after.XRange(stream);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1]["iteration"], "2");
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
