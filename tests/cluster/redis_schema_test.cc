// Checks the state-store schema (docs/redis-schema.md, schema version 1) against what a
// real cluster writes: redis-server, an `orrery head` daemon and an `orrery node` daemon on
// loopback, this binary as the driver, and a hiredis connection reading the records back.
// Every record of every table must hold exactly the documented fields with the documented
// JSON types, only documented keys may exist, and every message on the events channel must
// have the documented shape, so the document and the code cannot drift apart silently.
// When this test
// fails after a change to what the head persists, update docs/redis-schema.md (and the
// tables below) in the same change.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "orrery/orrery.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/cluster/redis_client.h"
#include "tests/skip_exit_code.h"

using nlohmann::json;
using orrery_cluster::WaitFor;

namespace {

using orrery_cluster::Redis;

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
  kHexId,              // string: 32 lowercase hex characters
  kHexIdOrEmpty,       // string: 32 lowercase hex characters, or "" (none)
  kString,             // string
  kEnum,               // string, one of `values`
  kInteger,            // JSON integer
  kNumber,             // JSON number (written from a double: 2 is written as 2.0)
  kBool,               // true / false
  kResources,          // object: string -> number
  kLabels,             // object: string -> string
  kStringArray,        // array of strings
  kHexIdOrEmptyArray,  // array of kHexIdOrEmpty
  kResourcesArray,     // array of kResources
  kHexMsgpack,         // string: lowercase hex of a msgpack array (the head's own spec)
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
        {"labels", {Kind::kLabels}},
        {"memory_used_bytes", {Kind::kInteger}},
        {"memory_total_bytes", {Kind::kInteger}},
        {"memory_usage_threshold", {Kind::kNumber}},
        {"object_store_capacity_bytes", {Kind::kInteger}},
        {"object_store_used_bytes", {Kind::kInteger}},
        {"object_store_spilled_bytes", {Kind::kInteger}},
        {"object_store_num_objects", {Kind::kInteger}},
        {"secret_sha256", {Kind::kString}},
        {"end_time", {Kind::kNumber}},
        {"metrics_address", {Kind::kString}}}},
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
        {"death_kind", {Kind::kString}},
        {"job_id", {Kind::kHexId}},
        {"placement_group_id", {Kind::kHexIdOrEmpty}},
        {"incarnation", {Kind::kInteger}},
        {"bundle", {Kind::kInteger}},
        {"kill_requested", {Kind::kBool}},
        {"subscribers", {Kind::kStringArray}},
        {"end_time", {Kind::kNumber}},
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
        {"executable_sha256", {Kind::kString}},
        {"arch", {Kind::kString}},
        {"state", {Kind::kEnum, {"RUNNING", "FINISHED"}}},
        {"start_time", {Kind::kNumber}},
        {"end_cause", {Kind::kString}},
        {"end_time", {Kind::kNumber}}}},
      {"pending",
       "id",
       {{"id", {Kind::kHexId}},
        {"kind", {Kind::kEnum, {"actor", "task", "placement_group"}}},
        {"demand", {Kind::kString}},
        {"reason", {Kind::kString}},
        {"waiting_s", {Kind::kNumber}}}},
      {"leases",
       "lease_id",
       {{"lease_id", {Kind::kHexId}},
        {"job_id", {Kind::kHexId}},
        {"node_id", {Kind::kHexIdOrEmpty}},
        {"bundle", {Kind::kInteger}},
        {"resources", {Kind::kResources}},
        {"request", {Kind::kHexMsgpack}}}},
  };
  return tables;
}

// Tables reserved for the training module (documented, not written yet): allowed to exist.
// "head": one record of the head itself under the field "head" (docs/redis-schema.md "head").
const std::set<std::string> kReservedHashes = {"train_runs", "head"};

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
      return v.is_string() && IsHexId(v.get<std::string>())
                 ? ""
                 : "expected 32 hex characters, got " + v.dump();
    case Kind::kHexIdOrEmpty:
      return hex_or_empty(v);
    case Kind::kString:
      return v.is_string() ? "" : "expected a string, got " + v.dump();
    case Kind::kEnum:
      return v.is_string() && f.values.count(v.get<std::string>())
                 ? ""
                 : "expected one of the documented values, got " + v.dump();
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

const std::string kPrefix = "orrery:default:";

// ------------------------------------------------------------------ the events channel

// An event: exactly {"table", "id", "state"}; "" when `text` is one, else what is wrong.
std::string CheckEvent(const std::string& text) {
  static const std::map<std::string, std::set<std::string>> kStates = {
      {"nodes", {"ALIVE", "DEAD"}},
      {"actors", {"PENDING", "ALIVE", "RESTARTING", "DEAD"}},
      {"placement_groups", {"PENDING", "CREATED", "REMOVED"}},
      {"jobs", {"RUNNING", "FINISHED"}}};
  json e = json::parse(text, nullptr, false);
  if (!e.is_object()) return "not a JSON object";
  std::set<std::string> keys;
  for (const auto& [k, v] : e.items()) keys.insert(k);
  if (keys != std::set<std::string>{"table", "id", "state"})
    return "fields differ from docs/redis-schema.md";
  if (!e["table"].is_string() || !kStates.count(e["table"].get<std::string>()))
    return "undocumented table";
  if (!e["id"].is_string() || !IsHexId(e["id"].get<std::string>()))
    return "id is not 32 hex characters";
  if (!e["state"].is_string() || !kStates.at(e["table"]).count(e["state"].get<std::string>())) {
    return "undocumented state for its table";
  }
  return "";
}

// Reads one message of a SUBSCRIBE connection within the connection's timeout; "" on none.
std::string NextEvent(redisContext* c) {
  void* msg = nullptr;
  if (redisGetReply(c, &msg) != REDIS_OK || !msg) return "";
  auto* m = static_cast<redisReply*>(msg);
  std::string text;
  if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 &&
      m->element[2]->type == REDIS_REPLY_STRING) {
    text = std::string(m->element[2]->str, m->element[2]->len);
  }
  freeReplyObject(m);
  return text;
}

// ------------------------------------------------------------------ the test

// A real cluster (tests/cluster/cluster_fixture.h): redis-server and the head start here;
// the node starts in the test, after it subscribed to the events channel.
class RedisSchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.StartHead(0.2, 3);
    const std::string& a = cluster_.redis_address();
    redis_port_ = std::atoi(a.c_str() + a.rfind(':') + 1);
  }
  void TearDown() override {
    if (orrery::IsInitialized()) orrery::Shutdown();
  }

  // Parsed records of one table, by hash field.
  std::map<std::string, json> Records(Redis& r, const std::string& table) {
    std::map<std::string, json> out;
    for (const auto& [id, text] : r.HGetAll(kPrefix + table))
      out[id] = json::parse(text, nullptr, false);
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
        EXPECT_EQ(got, want) << where
                             << ": fields differ from docs/redis-schema.md: " << rec.dump();
        for (const auto& [k, f] : t.schema) {
          if (!rec.contains(k)) continue;
          std::string e = Check(rec[k], f);
          EXPECT_TRUE(e.empty()) << where << "." << k << ": " << e;
        }
        if (rec.contains(t.id_field)) {
          EXPECT_EQ(rec[t.id_field], id)
              << where << ": " << t.id_field << " differs from the hash field";
        }
      }
    }
  }

  orrery_cluster::Cluster cluster_;
  int redis_port_ = 0;
};

TEST_F(RedisSchemaTest, EveryRecordAndEventHasExactlyTheDocumentedFieldsAndTypes) {
  Redis r(redis_port_);
  ASSERT_TRUE(r.ok());
  // Subscribe to the events channel before anything happens; read at the end.
  Redis events(redis_port_);
  ASSERT_TRUE(events.ok());
  {
    redisReply* s = static_cast<redisReply*>(
        redisCommand(events.raw(), "SUBSCRIBE %s", (kPrefix + "events").c_str()));
    ASSERT_NE(s, nullptr);
    freeReplyObject(s);
  }
  int node_pid = cluster_.AddNode("{\"Custom\": 4}", "zone=a,rack=r1", 4);

  orrery::Config c;
  c.address = cluster_.head_address();
  c.infeasible_timeout_s = -1;  // an actor no node can hold waits (and shows as pending)
  orrery::Init(c);
  ASSERT_TRUE(WaitFor([] { return orrery::Nodes().size() == 1; }));

  // A named actor, a placement group, an actor in one of its bundles, and two demands that
  // cannot be placed (a placement group and an actor), so that every table has records.
  auto probe = orrery::Actor(Probe::Create)
                   .SetName("schema_probe", "schema_ns")
                   .SetResources({{"CPU", 1}})
                   .SetMaxRestarts(1)
                   .Remote();
  ASSERT_EQ(*orrery::Get(probe.Task(&Probe::Inc).Remote(1), 30000), 1);
  auto pg = orrery::CreatePlacementGroup({.name = "schema_pg",
                                          .bundles = {{{"CPU", 1}}, {{"Custom", 1}}},
                                          .strategy = orrery::PlacementStrategy::PACK});
  ASSERT_TRUE(pg.Wait(30));
  auto in_pg = orrery::Actor(Probe::Create)
                   .SetResources({{"Custom", 1}})
                   .SetPlacementGroup(pg, 1)
                   .SetLifetime(orrery::ActorLifetime::kDetached)
                   .Remote();
  ASSERT_EQ(*orrery::Get(in_pg.Task(&Probe::Inc).Remote(2), 30000), 2);
  auto stuck_pg =
      orrery::CreatePlacementGroup({.name = "schema_stuck", .bundles = {{{"Custom", 100}}}});
  auto stuck_actor = orrery::Actor(Probe::Create).SetResources({{"Custom", 100}}).Remote();

  std::string probe_hex = probe.ID().Hex(), in_pg_hex = in_pg.ID().Hex(),
              stuck_hex = stuck_actor.ID().Hex();
  std::string pg_hex = pg.Id().Hex(), stuck_pg_hex = stuck_pg.Id().Hex();
  // Writes reach Redis asynchronously (a background thread pipelines them): poll.
  ASSERT_TRUE(WaitFor([&] {
    auto actors = Records(r, "actors");
    auto pgs = Records(r, "placement_groups");
    auto pending = Records(r, "pending");
    return Records(r, "nodes").size() == 1 && actors.count(probe_hex) &&
           actors[probe_hex]["state"] == "ALIVE" && actors.count(in_pg_hex) &&
           actors[in_pg_hex]["state"] == "ALIVE" && actors.count(stuck_hex) && pgs.count(pg_hex) &&
           pgs[pg_hex]["state"] == "CREATED" && pgs.count(stuck_pg_hex) &&
           !pgs[stuck_pg_hex].value("reason", "").empty() && pending.count(stuck_hex) &&
           pending.count(stuck_pg_hex) && !Find(r, "jobs", "state", "RUNNING").is_null();
  })) << "the head did not write the expected records";
  ExpectAllRecordsMatchTheSchema(r, "while running");

  // A few values, as documented.
  auto node = Records(r, "nodes").begin()->second;
  std::string node_hex = node["node_id"];
  EXPECT_EQ(node["alive"], true);
  EXPECT_EQ(node["total"]["CPU"], 4);
  EXPECT_EQ(node["total"]["Custom"], 4);
  EXPECT_EQ(node["labels"]["zone"], "a");
  EXPECT_EQ(node["labels"]["rack"], "r1");
  EXPECT_EQ(node["labels"]["orrery.io/node-id"], node_hex);
  EXPECT_EQ(node["address"].get<std::string>().rfind("tcp://", 0), 0u) << node.dump();
  // The node's memory monitor reads this (real) host: something is in use, within the total.
  EXPECT_GT(node["memory_total_bytes"].get<int64_t>(), 0) << node.dump();
  EXPECT_GT(node["memory_used_bytes"].get<int64_t>(), 0) << node.dump();
  EXPECT_LE(node["memory_used_bytes"].get<int64_t>(), node["memory_total_bytes"].get<int64_t>())
      << node.dump();
  EXPECT_EQ(node["memory_usage_threshold"], 0.95) << node.dump();
  auto a = Records(r, "actors")[probe_hex];
  EXPECT_EQ(a["name"], "schema_probe");
  EXPECT_EQ(a["namespace"], "schema_ns");
  EXPECT_EQ(a["class"], "Probe");
  EXPECT_EQ(a["resources"], json({{"CPU", 1.0}}));
  EXPECT_EQ(a["node_id"], node_hex);
  EXPECT_EQ(a["max_restarts"], 1);
  EXPECT_EQ(a["detached"], false);
  EXPECT_EQ(a["bundle"], -1);
  EXPECT_GT(a["pid"].get<int>(), 0);
  EXPECT_EQ(a["address"].get<std::string>().rfind("tcp://", 0), 0u) << a.dump();
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
  EXPECT_EQ(pgrec["bundle_nodes"], json::array({node_hex, node_hex}));
  EXPECT_EQ(Records(r, "placement_groups")[stuck_pg_hex]["state"], "PENDING");
  EXPECT_EQ(Records(r, "placement_groups")[stuck_pg_hex]["bundle_nodes"], json::array());
  EXPECT_EQ(Records(r, "pending")[stuck_hex]["kind"], "actor");
  EXPECT_EQ(Records(r, "pending")[stuck_pg_hex]["kind"], "placement_group");
  auto job = Find(r, "jobs", "state", "RUNNING");
  std::string job_hex = job["job_id"];
  EXPECT_EQ(job["pid"], int(getpid()));
  EXPECT_GT(job["start_time"].get<double>(), 1.5e9);  // Unix seconds
  EXPECT_EQ(job["end_cause"], "");

  // Other states: a killed actor, a removed placement group, an ended job, a dead node.
  probe.Kill();
  orrery::RemovePlacementGroup(stuck_pg.Id());
  ASSERT_TRUE(WaitFor([&] {
    auto actors = Records(r, "actors");
    return actors[probe_hex]["state"] == "DEAD" &&
           Records(r, "placement_groups")[stuck_pg_hex]["state"] == "REMOVED" &&
           !Records(r, "pending").count(stuck_pg_hex);
  })) << "the kill and the removal did not reach Redis";
  EXPECT_FALSE(Records(r, "actors")[probe_hex]["death_cause"].get<std::string>().empty());
  EXPECT_EQ(Records(r, "actors")[probe_hex]["kill_requested"], true);
  in_pg.Kill();
  orrery::Shutdown();
  ASSERT_TRUE(WaitFor([&] { return Records(r, "jobs")[job_hex]["state"] == "FINISHED"; }))
      << "the job did not end";
  EXPECT_FALSE(Records(r, "jobs")[job_hex]["end_cause"].get<std::string>().empty());
  orrery_cluster::KillHard(node_pid);
  ASSERT_TRUE(WaitFor([&] { return Records(r, "nodes")[node_hex]["alive"] == false; }))
      << "the node stayed alive";
  ExpectAllRecordsMatchTheSchema(r, "after kill, removal, shutdown and node death");

  // Only documented keys exist under the cluster's prefix, each of the documented type.
  std::set<std::string> documented;
  for (const auto& t : Tables()) documented.insert(t.name);
  for (const auto& key : r.Strings({"KEYS", kPrefix + "*"})) {
    std::string rest = key.substr(kPrefix.size());
    bool metrics = rest.rfind("train:", 0) == 0 && rest.size() > 14 &&
                   rest.substr(rest.size() - 8) == ":metrics";
    if (metrics) {
      EXPECT_EQ(r.Type(key), "stream") << key;
      continue;
    }
    EXPECT_TRUE(documented.count(rest) || kReservedHashes.count(rest))
        << "undocumented key " << key;
    EXPECT_EQ(r.Type(key), "hash") << key;
  }

  // Events: each is {"table", "id", "state"} and names a record of its table; every state
  // change above was announced.
  std::set<std::string> expected = {"nodes " + node_hex + " ALIVE",
                                    "nodes " + node_hex + " DEAD",
                                    "actors " + probe_hex + " ALIVE",
                                    "actors " + probe_hex + " DEAD",
                                    "actors " + stuck_hex + " PENDING",
                                    "placement_groups " + pg_hex + " CREATED",
                                    "placement_groups " + stuck_pg_hex + " PENDING",
                                    "placement_groups " + stuck_pg_hex + " REMOVED",
                                    "jobs " + job_hex + " RUNNING",
                                    "jobs " + job_hex + " FINISHED"};
  std::set<std::string> seen;
  redisSetTimeout(events.raw(), timeval{0, 500 * 1000});
  while (true) {
    std::string text = NextEvent(events.raw());
    if (text.empty()) break;  // nothing within the timeout: all read
    std::string e = CheckEvent(text);
    EXPECT_TRUE(e.empty()) << "event " << text << ": " << e;
    if (!e.empty()) continue;
    json ev = json::parse(text);
    std::string table = ev["table"], id = ev["id"];
    EXPECT_TRUE(Records(r, table).count(id)) << "event " << text << " names no record";
    seen.insert(table + " " + id + " " + ev["state"].get<std::string>());
  }
  for (const auto& e : expected) EXPECT_TRUE(seen.count(e)) << "no event " << e;
}

}  // namespace

int main(int argc, char** argv) {
  orrery::RunWorkerIfRequested(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return orrery_test::ExitCode(RUN_ALL_TESTS());
}
