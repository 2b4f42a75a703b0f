// Checks the state-store schema (docs/redis-schema.md, schema version 1) against what a
// real cluster writes: redis-server, an `orrery head` daemon and an `orrery node` daemon on
// loopback, this binary as the driver, and a hiredis connection reading the records back.
// Every record of every table must hold exactly the documented fields with the documented
// JSON types, so the document and the code cannot drift apart silently. When this test
// fails after a change to what the head persists, update docs/redis-schema.md (and the
// tables below) in the same change.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "orrery/orrery.h"
#include "tests/cluster/cluster_fixture.h"

using nlohmann::json;
using orrery_cluster::WaitFor;

namespace {

class Probe {
 public:
  static Probe* Create() { return new Probe(); }
  int Inc(int by) { return value_ += by; }

 private:
  int value_ = 0;
};
ORRERY_REMOTE(Probe::Create, &Probe::Inc);

// ------------------------------------------------------------------ the documented schema

enum class Kind {
  kHexId,           // string: 32 lowercase hex characters
  kHexIdOrEmpty,    // string: 32 lowercase hex characters, or "" (none)
  kString,          // string
  kEnum,            // string, one of `values`
  kInteger,         // JSON integer
  kNumber,          // JSON number (written from a double: 2 is written as 2.0)
  kBool,            // true / false
  kResources,       // object: string -> number
  kLabels,          // object: string -> string
  kStringArray,     // array of strings
  kHexIdOrEmptyArray,  // array of kHexIdOrEmpty
  kResourcesArray,  // array of kResources
  kHexMsgpack,      // string: lowercase hex of a msgpack array (the head's own spec)
};

struct Field {
  Kind kind;
  std::set<std::string> values = {};  // kEnum only
};

using Schema = std::map<std::string, Field>;

// One entry per table: its name and the field of its records that equals the hash field.
struct Table {
  std::string name;
  std::string id_field;
  Schema schema;
};

const std::vector<Table>& Tables() {
  static const std::vector<Table> tables = {
      {"nodes",
       "node_id",
       {{"node_id", {Kind::kHexId}},
        {"address", {Kind::kString}},
        {"alive", {Kind::kBool}},
        {"total", {Kind::kResources}},
        {"labels", {Kind::kLabels}}}},
      {"actors",
       "actor_id",
       {{"actor_id", {Kind::kHexId}},
        {"class", {Kind::kString}},
        {"state", {Kind::kEnum, {"PENDING", "ALIVE", "RESTARTING", "DEAD"}}},
        {"name", {Kind::kString}},
        {"namespace", {Kind::kString}},
        {"resources", {Kind::kResources}},
        {"address", {Kind::kString}},
        {"pid", {Kind::kInteger}},
        {"node_id", {Kind::kHexIdOrEmpty}},
        {"restarts", {Kind::kInteger}},
        {"max_restarts", {Kind::kInteger}},
        {"detached", {Kind::kBool}},
        {"death_cause", {Kind::kString}},
        {"incarnation", {Kind::kInteger}},
        {"bundle", {Kind::kInteger}},
        {"kill_requested", {Kind::kBool}},
        {"subscribers", {Kind::kStringArray}},
        {"spec", {Kind::kHexMsgpack}}}},
      {"placement_groups",
       "placement_group_id",
       {{"placement_group_id", {Kind::kHexId}},
        {"name", {Kind::kString}},
        {"strategy", {Kind::kEnum, {"PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"}}},
        {"bundles", {Kind::kResourcesArray}},
        {"bundle_nodes", {Kind::kHexIdOrEmptyArray}},
        {"state", {Kind::kEnum, {"PENDING", "CREATED", "REMOVED"}}},
        {"reason", {Kind::kString}},
        {"spec", {Kind::kHexMsgpack}}}},
      {"jobs",
       "job_id",
       {{"job_id", {Kind::kHexId}},
        {"driver_address", {Kind::kString}},
        {"pid", {Kind::kInteger}},
        {"namespace", {Kind::kString}},
        {"entrypoint", {Kind::kString}},
        {"state", {Kind::kEnum, {"RUNNING", "FINISHED"}}},
        {"start_time", {Kind::kNumber}},
        {"end_cause", {Kind::kString}}}},
      {"pending",
       "id",
       {{"id", {Kind::kHexId}},
        {"kind", {Kind::kEnum, {"actor", "task", "placement_group"}}},
        {"demand", {Kind::kString}},
        {"reason", {Kind::kString}},
        {"waiting_s", {Kind::kNumber}}}},
  };
  return tables;
}

// Tables reserved for the training module (documented, not written yet): allowed to exist.
const std::set<std::string> kReservedHashes = {"train_runs"};

bool IsHex(const std::string& s) {
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)) && !(c >= 'a' && c <= 'f')) return false;
  return true;
}
bool IsHexId(const std::string& s) { return s.size() == 32 && IsHex(s); }

// "" when `v` matches `f`, else what is wrong.
std::string Check(const json& v, const Field& f) {
  auto resources = [](const json& o) -> std::string {
    if (!o.is_object()) return "expected an object of numbers, got " + o.dump();
    for (const auto& [k, x] : o.items())
      if (!x.is_number()) return "resource " + k + " is not a number: " + x.dump();
    return "";
  };
  auto hex_or_empty = [](const json& s) -> std::string {
    if (!s.is_string() || !(s.get<std::string>().empty() || IsHexId(s.get<std::string>())))
      return "expected 32 hex characters or \"\", got " + s.dump();
    return "";
  };
  switch (f.kind) {
    case Kind::kHexId:
      return v.is_string() && IsHexId(v.get<std::string>()) ? "" : "expected 32 hex characters, got " + v.dump();
    case Kind::kHexIdOrEmpty:
      return hex_or_empty(v);
    case Kind::kString:
      return v.is_string() ? "" : "expected a string, got " + v.dump();
    case Kind::kEnum:
      return v.is_string() && f.values.count(v.get<std::string>()) ? "" : "expected one of the documented values, got " + v.dump();
    case Kind::kInteger:
      return v.is_number_integer() ? "" : "expected an integer, got " + v.dump();
    case Kind::kNumber:
      return v.is_number() ? "" : "expected a number, got " + v.dump();
    case Kind::kBool:
      return v.is_boolean() ? "" : "expected true or false, got " + v.dump();
    case Kind::kResources:
      return resources(v);
    case Kind::kLabels:
      if (!v.is_object()) return "expected an object of strings, got " + v.dump();
      for (const auto& [k, x] : v.items())
        if (!x.is_string()) return "label " + k + " is not a string: " + x.dump();
      return "";
    case Kind::kStringArray:
      if (!v.is_array()) return "expected an array of strings, got " + v.dump();
      for (const auto& x : v)
        if (!x.is_string()) return "expected an array of strings, got " + v.dump();
      return "";
    case Kind::kHexIdOrEmptyArray:
      if (!v.is_array()) return "expected an array, got " + v.dump();
      for (const auto& x : v)
        if (auto e = hex_or_empty(x); !e.empty()) return e;
      return "";
    case Kind::kResourcesArray:
      if (!v.is_array()) return "expected an array of objects, got " + v.dump();
      for (const auto& x : v)
        if (auto e = resources(x); !e.empty()) return e;
      return "";
    case Kind::kHexMsgpack: {
      if (!v.is_string()) return "expected a hex string, got " + v.dump();
      std::string s = v.get<std::string>();
      if (s.size() < 2 || s.size() % 2 || !IsHex(s)) return "expected lowercase hex of even length";
      int first = std::stoi(s.substr(0, 2), nullptr, 16);
      // msgpack array markers: fixarray 0x90-0x9f, array16 0xdc, array32 0xdd.
      bool array = (first >= 0x90 && first <= 0x9f) || first == 0xdc || first == 0xdd;
      return array ? "" : "expected a msgpack array, first byte is " + s.substr(0, 2);
    }
  }
  return "unknown kind";
}

// ------------------------------------------------------------------ Redis access

class Redis {
 public:
  explicit Redis(int port) {
    timeval tv{5, 0};
    c_ = redisConnectWithTimeout("127.0.0.1", port, tv);
  }
  ~Redis() {
    if (c_) redisFree(c_);
  }
  bool ok() const { return c_ && !c_->err; }
  redisContext* raw() { return c_; }

  std::vector<std::string> Strings(const std::vector<std::string>& argv) {
    std::vector<std::string> out;
    redisReply* r = Command(argv);
    if (!r) return out;
    if (r->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < r->elements; ++i) out.emplace_back(r->element[i]->str, r->element[i]->len);
    } else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
      out.emplace_back(r->str, r->len);
    }
    freeReplyObject(r);
    return out;
  }
  std::map<std::string, std::string> HGetAll(const std::string& key) {
    auto flat = Strings({"HGETALL", key});
    std::map<std::string, std::string> out;
    for (size_t i = 0; i + 1 < flat.size(); i += 2) out[flat[i]] = flat[i + 1];
    return out;
  }
  std::string Type(const std::string& key) {
    auto v = Strings({"TYPE", key});
    return v.empty() ? "" : v[0];
  }

 private:
  redisReply* Command(const std::vector<std::string>& argv) {
    std::vector<const char*> p;
    std::vector<size_t> l;
    for (const auto& a : argv) {
      p.push_back(a.data());
      l.push_back(a.size());
    }
    return static_cast<redisReply*>(redisCommandArgv(c_, int(argv.size()), p.data(), l.data()));
  }
  redisContext* c_ = nullptr;
};

const std::string kPrefix = "orrery:default:";

// ------------------------------------------------------------------ the cluster

bool LogHas(const std::string& log, const std::string& needle) {
  std::ifstream in(log);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return content.find(needle) != std::string::npos;
}

// redis-server, `orrery head` and one `orrery node`, started with the fixture's helpers
// (the fixture's Cluster does not expose its Redis address).
class RedisSchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/orrery_schema_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
    redis_port_ = orrery_cluster::FreePort();
    std::string rlog = dir_ + "/redis.log";
    redis_pid_ = orrery_cluster::Spawn({"redis-server", "--port", std::to_string(redis_port_), "--bind", "127.0.0.1",
                                        "--dir", dir_, "--save", "", "--appendonly", "no"},
                                       rlog);
    ASSERT_TRUE(WaitFor([&] { return LogHas(rlog, "Ready to accept connections"); })) << "redis did not start";
    head_address_ = "127.0.0.1:" + std::to_string(orrery_cluster::FreePort());
    std::string hlog = dir_ + "/head.log";
    head_pid_ = orrery_cluster::Spawn(
        {orrery_cluster::CliPath(), "head", "--port", head_address_.substr(head_address_.rfind(':') + 1),
         "--redis-address", "127.0.0.1:" + std::to_string(redis_port_), "--health-check-period-s", "0.2",
         "--health-check-failure-threshold", "3"},
        hlog);
    ASSERT_TRUE(WaitFor([&] { return LogHas(hlog, "head listening on"); })) << "the head did not start";
    std::string nlog = dir_ + "/node.log";
    node_pid_ = orrery_cluster::Spawn({orrery_cluster::CliPath(), "node", "--address", head_address_, "--num-cpus", "4",
                                       "--resources", "{\"Custom\": 4}", "--labels", "zone=a,rack=r1", "--heartbeat-s",
                                       "0.2"},
                                      nlog);
    ASSERT_TRUE(WaitFor([&] { return LogHas(nlog, " up at "); })) << "the node did not start";
  }
  void TearDown() override {
    if (orrery::IsInitialized()) orrery::Shutdown();
    orrery_cluster::KillHard(node_pid_);
    orrery_cluster::KillHard(head_pid_);
    orrery_cluster::KillHard(redis_pid_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Parsed records of one table, by hash field.
  std::map<std::string, json> Records(Redis& r, const std::string& table) {
    std::map<std::string, json> out;
    for (const auto& [id, text] : r.HGetAll(kPrefix + table)) out[id] = json::parse(text, nullptr, false);
    return out;
  }
  // The first record of `table` whose `field` equals `value` (null when none).
  json Find(Redis& r, const std::string& table, const std::string& field, const json& value) {
    for (const auto& [id, j] : Records(r, table))
      if (j.is_object() && j.contains(field) && j[field] == value) return j;
    return json();
  }

  // Every record of every documented table has exactly the documented fields and types.
  void ExpectAllRecordsMatchTheSchema(Redis& r, const std::string& when) {
    for (const auto& t : Tables()) {
      for (const auto& [id, rec] : Records(r, t.name)) {
        std::string where = when + ": " + t.name + "[" + id + "]";
        EXPECT_TRUE(IsHexId(id)) << where << ": the hash field is not 32 hex characters";
        ASSERT_TRUE(rec.is_object()) << where << ": not a JSON object";
        std::set<std::string> got, want;
        for (const auto& [k, v] : rec.items()) got.insert(k);
        for (const auto& [k, f] : t.schema) want.insert(k);
        EXPECT_EQ(got, want) << where << ": fields differ from docs/redis-schema.md: " << rec.dump();
        for (const auto& [k, f] : t.schema) {
          if (!rec.contains(k)) continue;
          std::string e = Check(rec[k], f);
          EXPECT_TRUE(e.empty()) << where << "." << k << ": " << e;
        }
        if (rec.contains(t.id_field)) {
          EXPECT_EQ(rec[t.id_field], id) << where << ": " << t.id_field << " differs from the hash field";
        }
      }
    }
  }

  std::string dir_, head_address_;
  int redis_port_ = 0, redis_pid_ = -1, head_pid_ = -1, node_pid_ = -1;
};

TEST_F(RedisSchemaTest, EveryRecordHasExactlyTheDocumentedFieldsAndTypes) {
  Redis r(redis_port_);
  ASSERT_TRUE(r.ok());
  // Subscribe to the events channel before anything happens (see the end of the test).
  Redis events(redis_port_);
  ASSERT_TRUE(events.ok());
  {
    redisReply* s = static_cast<redisReply*>(redisCommand(events.raw(), "SUBSCRIBE %s", (kPrefix + "events").c_str()));
    ASSERT_NE(s, nullptr);
    freeReplyObject(s);
  }

  orrery::Config c;
  c.address = head_address_;
  c.infeasible_timeout_s = -1;  // an actor no node can hold waits (and shows as pending)
  orrery::Init(c);
  ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == 1; }));

  // A named actor, a placement group, an actor in one of its bundles, and two demands that
  // cannot be placed (a placement group and an actor), so that every table has records.
  auto probe = orrery::Actor(Probe::Create).SetName("schema_probe", "schema_ns").SetResources({{"CPU", 1}})
                   .SetMaxRestarts(1).Remote();
  ASSERT_EQ(*orrery::Get(probe.Task(&Probe::Inc).Remote(1), 30000), 1);
  auto pg = orrery::CreatePlacementGroup({.name = "schema_pg",
                                          .bundles = {{{"CPU", 1}}, {{"Custom", 1}}},
                                          .strategy = orrery::PlacementStrategy::PACK});
  ASSERT_TRUE(pg.Wait(30));
  auto in_pg = orrery::Actor(Probe::Create).SetResources({{"Custom", 1}}).SetPlacementGroup(pg, 1)
                   .SetLifetime(orrery::ActorLifetime::kDetached).Remote();
  ASSERT_EQ(*orrery::Get(in_pg.Task(&Probe::Inc).Remote(2), 30000), 2);
  auto stuck_pg = orrery::CreatePlacementGroup({.name = "schema_stuck", .bundles = {{{"Custom", 100}}}});
  auto stuck_actor = orrery::Actor(Probe::Create).SetResources({{"Custom", 100}}).Remote();

  std::string probe_hex = probe.ID().Hex(), in_pg_hex = in_pg.ID().Hex(), stuck_hex = stuck_actor.ID().Hex();
  std::string pg_hex = pg.Id().Hex(), stuck_pg_hex = stuck_pg.Id().Hex();
  // Writes reach Redis asynchronously (a background thread pipelines them): poll.
  ASSERT_TRUE(WaitFor([&] {
    auto actors = Records(r, "actors");
    auto pgs = Records(r, "placement_groups");
    auto pending = Records(r, "pending");
    return Records(r, "nodes").size() == 1 && actors.count(probe_hex) && actors[probe_hex]["state"] == "ALIVE" &&
           actors.count(in_pg_hex) && actors[in_pg_hex]["state"] == "ALIVE" && actors.count(stuck_hex) &&
           pgs.count(pg_hex) && pgs[pg_hex]["state"] == "CREATED" && pgs.count(stuck_pg_hex) &&
           !pgs[stuck_pg_hex].value("reason", "").empty() && pending.count(stuck_hex) && pending.count(stuck_pg_hex) &&
           !Find(r, "jobs", "state", "RUNNING").is_null();
  })) << "the head did not write the expected records";
  ExpectAllRecordsMatchTheSchema(r, "while running");

  // A few values, as documented.
  auto node = Records(r, "nodes").begin()->second;
  EXPECT_EQ(node["alive"], true);
  EXPECT_EQ(node["total"]["CPU"], 4);
  EXPECT_EQ(node["total"]["Custom"], 4);
  EXPECT_EQ(node["labels"]["zone"], "a");
  EXPECT_EQ(node["labels"]["rack"], "r1");
  EXPECT_EQ(node["labels"]["orrery.io/node-id"], node["node_id"]);
  EXPECT_EQ(node["address"].get<std::string>().rfind("tcp://", 0), 0u) << node.dump();
  auto a = Records(r, "actors")[probe_hex];
  EXPECT_EQ(a["name"], "schema_probe");
  EXPECT_EQ(a["namespace"], "schema_ns");
  EXPECT_EQ(a["class"], "Probe::Create");
  EXPECT_EQ(a["resources"], json({{"CPU", 1.0}}));
  EXPECT_EQ(a["node_id"], node["node_id"]);
  EXPECT_EQ(a["max_restarts"], 1);
  EXPECT_EQ(a["detached"], false);
  EXPECT_EQ(a["bundle"], -1);
  EXPECT_GT(a["pid"].get<int>(), 0);
  EXPECT_FALSE(a["address"].get<std::string>().empty());
  EXPECT_FALSE(a["subscribers"].empty());
  auto in_pg_rec = Records(r, "actors")[in_pg_hex];
  EXPECT_EQ(in_pg_rec["detached"], true);
  EXPECT_EQ(in_pg_rec["bundle"], 1);
  auto stuck = Records(r, "actors")[stuck_hex];
  EXPECT_EQ(stuck["state"], "PENDING");
  EXPECT_EQ(stuck["node_id"], "");
  EXPECT_EQ(stuck["pid"], 0);
  auto pgrec = Records(r, "placement_groups")[pg_hex];
  EXPECT_EQ(pgrec["name"], "schema_pg");
  EXPECT_EQ(pgrec["strategy"], "PACK");
  EXPECT_EQ(pgrec["bundles"], json::parse(R"([{"CPU": 1.0}, {"Custom": 1.0}])"));
  EXPECT_EQ(pgrec["bundle_nodes"], json::array({node["node_id"], node["node_id"]}));
  EXPECT_EQ(Records(r, "placement_groups")[stuck_pg_hex]["state"], "PENDING");
  EXPECT_EQ(Records(r, "pending")[stuck_hex]["kind"], "actor");
  EXPECT_EQ(Records(r, "pending")[stuck_pg_hex]["kind"], "placement_group");
  auto job = Find(r, "jobs", "state", "RUNNING");
  EXPECT_EQ(job["pid"], int(getpid()));
  EXPECT_GT(job["start_time"].get<double>(), 1.5e9);  // Unix seconds
  EXPECT_EQ(job["end_cause"], "");

  // Other states: a killed actor, a removed placement group, an ended job, a dead node.
  probe.Kill();
  orrery::RemovePlacementGroup(stuck_pg.Id());
  ASSERT_TRUE(WaitFor([&] {
    auto actors = Records(r, "actors");
    return actors[probe_hex]["state"] == "DEAD" && Records(r, "placement_groups")[stuck_pg_hex]["state"] == "REMOVED" &&
           !Records(r, "pending").count(stuck_pg_hex);
  })) << "the kill and the removal did not reach Redis";
  EXPECT_FALSE(Records(r, "actors")[probe_hex]["death_cause"].get<std::string>().empty());
  EXPECT_EQ(Records(r, "actors")[probe_hex]["kill_requested"], true);
  in_pg.Kill();
  orrery::Shutdown();
  ASSERT_TRUE(WaitFor([&] { return !Find(r, "jobs", "state", "FINISHED").is_null(); })) << "the job did not end";
  EXPECT_FALSE(Find(r, "jobs", "state", "FINISHED")["end_cause"].get<std::string>().empty());
  orrery_cluster::KillHard(node_pid_);
  node_pid_ = -1;
  ASSERT_TRUE(WaitFor([&] { return Records(r, "nodes").begin()->second["alive"] == false; })) << "the node stayed alive";
  ExpectAllRecordsMatchTheSchema(r, "after kill, removal, shutdown and node death");

  // Only documented keys exist under the cluster's prefix, each of the documented type.
  std::set<std::string> documented;
  for (const auto& t : Tables()) documented.insert(t.name);
  for (const auto& key : r.Strings({"KEYS", kPrefix + "*"})) {
    std::string rest = key.substr(kPrefix.size());
    bool metrics = rest.rfind("train:", 0) == 0 && rest.size() > 14 && rest.substr(rest.size() - 8) == ":metrics";
    if (metrics) {
      EXPECT_EQ(r.Type(key), "stream") << key;
      continue;
    }
    EXPECT_TRUE(documented.count(rest) || kReservedHashes.count(rest)) << "undocumented key " << key;
    EXPECT_EQ(r.Type(key), "hash") << key;
  }

  // docs/redis-schema.md says nothing publishes on the events channel yet. If this fails,
  // document the events (their JSON) there and check them here.
  redisSetTimeout(events.raw(), timeval{0, 300 * 1000});
  void* msg = nullptr;
  bool got = redisGetReply(events.raw(), &msg) == REDIS_OK && msg;
  std::string text;
  if (got) {
    auto* m = static_cast<redisReply*>(msg);
    if (m->type == REDIS_REPLY_ARRAY && m->elements == 3) text = std::string(m->element[2]->str, m->element[2]->len);
    freeReplyObject(m);
  }
  EXPECT_FALSE(got) << "something published on " << kPrefix << "events: " << text;
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
