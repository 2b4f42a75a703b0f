// The dashboard's JSON API (dashboard/src/api.h) on fake table contents, and its routing
// (dashboard/src/server.h HandleRequest) without Redis.
#include "dashboard/src/api.h"

#include <gtest/gtest.h>

#include "dashboard/src/server.h"

namespace orrery::dashboard {
namespace {

using nlohmann::json;

const RedisState kOk{"127.0.0.1:6379", true, ""};
const std::string kN1 = "11111111111111111111111111111111";
const std::string kN2 = "22222222222222222222222222222222";
const std::string kN3 = "33333333333333333333333333333333";

// A node record with the object_store_* fields the head writes.
std::string WithStore(const std::string& record, int64_t capacity, int64_t used, int64_t spilled,
                      int64_t objects) {
  json j = json::parse(record);
  j["object_store_capacity_bytes"] = capacity;
  j["object_store_used_bytes"] = used;
  j["object_store_spilled_bytes"] = spilled;
  j["object_store_num_objects"] = objects;
  return j.dump();
}

std::string Node(const std::string& id, bool alive, const json& total,
                 const json& labels = json::object()) {
  json l = labels;
  l["orrery.io/node-id"] = id;
  return json{{"node_id", id},
              {"address", "tcp://127.0.0.1:1" + id.substr(0, 4)},
              {"alive", alive},
              {"total", total},
              {"labels", l}}
      .dump();
}

std::string Actor(const std::string& id, const std::string& state, const std::string& node,
                  const json& resources, const std::string& pg = "") {
  return json{{"actor_id", id},
              {"class", "Counter"},
              {"state", state},
              {"node_id", node},
              {"resources", resources},
              {"placement_group_id", pg},
              {"bundle", pg.empty() ? -1 : 0}}
      .dump();
}

std::string Pg(const std::string& id, const std::string& state, const json& bundles,
               const json& bundle_nodes) {
  return json{{"placement_group_id", id},
              {"state", state},
              {"bundles", bundles},
              {"bundle_nodes", bundle_nodes},
              {"strategy", "PACK"},
              {"name", ""},
              {"reason", ""}}
      .dump();
}

std::string Id(char c) { return std::string(32, c); }

// Two alive nodes and a dead one; actors inside and outside groups in every state.
Tables ClusterTables() {
  Tables t;
  t.nodes[kN1] = WithStore(Node(kN1, true, {{"CPU", 4.0}, {"memory", 1000.0}}), 8192, 4096, 0, 3);
  t.nodes[kN2] = WithStore(Node(kN2, true, {{"CPU", 2.0}, {"GPU", 2.0}}), 1024, 100, 2048, 1);
  t.nodes[kN3] = WithStore(Node(kN3, false, {{"CPU", 8.0}}), 1 << 20, 1 << 20, 0, 9);
  t.placement_groups[Id('a')] =
      Pg(Id('a'), "CREATED", json::array({{{"CPU", 1.0}}, {{"GPU", 1.0}}}), {kN1, kN2});
  t.placement_groups[Id('b')] =
      Pg(Id('b'), "PENDING", json::array({{{"CPU", 1.0}}}), json::array());
  t.placement_groups[Id('c')] = Pg(Id('c'), "REMOVED", json::array({{{"CPU", 2.0}}}), {kN1});
  t.actors[Id('1')] = Actor(Id('1'), "ALIVE", kN1, {{"CPU", 1.0}});
  t.actors[Id('2')] = Actor(Id('2'), "ALIVE", kN1, {{"CPU", 1.0}}, Id('a'));  // inside its bundle
  t.actors[Id('3')] = Actor(Id('3'), "DEAD", "", {{"CPU", 1.0}});
  t.actors[Id('4')] = Actor(Id('4'), "PENDING", "", {{"CPU", 1.0}});   // not placed
  t.actors[Id('5')] = Actor(Id('5'), "PENDING", kN2, {{"CPU", 0.5}});  // placed, starting
  t.actors[Id('6')] = Actor(Id('6'), "ALIVE", kN3, {{"CPU", 3.0}});    // on the dead node
  return t;
}

TEST(DashboardApi, ParseRecordsSkipsBadJson) {
  Table table{{Id('1'), R"({"id": "1"})"},
              {Id('2'), "{not json"},
              {Id('3'), "[1, 2]"},
              {Id('4'), ""},
              {Id('5'), R"({"id": "5"})"}};
  auto records = ParseRecords(table);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["id"], "1");
  EXPECT_EQ(records[1]["id"], "5");
}

TEST(DashboardApi, UsedByNodeCountsCreatedBundlesAndPlacedActorsOutsideThem) {
  Tables t = ClusterTables();
  auto used = UsedByNode(t.actors, t.placement_groups);
  // n1: bundle {CPU 1} of group a + actor 1 {CPU 1}; actor 2 runs inside the bundle;
  // the removed group c holds nothing.
  EXPECT_DOUBLE_EQ(used[kN1]["CPU"], 2.0);
  // n2: bundle {GPU 1} + the placed, starting actor 5 {CPU 0.5}.
  EXPECT_DOUBLE_EQ(used[kN2]["GPU"], 1.0);
  EXPECT_DOUBLE_EQ(used[kN2]["CPU"], 0.5);
  EXPECT_DOUBLE_EQ(used[kN3]["CPU"], 3.0);
  EXPECT_EQ(used.count(""), 0u);  // unplaced actors count nowhere
}

TEST(DashboardApi, ClusterSumsAliveNodesOnly) {
  json c = ClusterResponse(kOk, ClusterTables());
  EXPECT_EQ(c["redis"], (json{{"address", "127.0.0.1:6379"}, {"ok", true}, {"error", ""}}));
  EXPECT_EQ(c["nodes"], (json{{"alive", 2}, {"dead", 1}}));
  EXPECT_EQ(c["resources"]["CPU"], (json{{"total", 6}, {"used", 2.5}}));
  EXPECT_EQ(c["resources"]["GPU"], (json{{"total", 2}, {"used", 1}}));
  EXPECT_EQ(c["resources"]["memory"], (json{{"total", 1000}, {"used", 0}}));
  EXPECT_EQ(c["actors"], (json{{"ALIVE", 3}, {"DEAD", 1}, {"PENDING", 2}}));
  EXPECT_EQ(c["runs"], json::object());
  EXPECT_EQ(c["tpu_slices"], json::array());
  EXPECT_EQ(c["object_store"], (json{{"capacity_bytes", 9216},
                                     {"used_bytes", 4196},
                                     {"spilled_bytes", 2048},
                                     {"num_objects", 4}}));
}

TEST(DashboardApi, ClusterCountsRunsByStatus) {
  Tables t;
  t.train_runs[Id('1')] = R"({"id": "1", "status": "RUNNING"})";
  t.train_runs[Id('2')] = R"({"id": "2", "status": "FINISHED"})";
  t.train_runs[Id('3')] = R"({"id": "3", "status": "FINISHED"})";
  t.train_runs[Id('4')] = "garbage";
  EXPECT_EQ(ClusterResponse(kOk, t)["runs"], (json{{"FINISHED", 2}, {"RUNNING", 1}}));
}

TEST(DashboardApi, TpuSlicesGroupHostsByLabels) {
  auto labels = [](const std::string& slice, const std::string& worker) {
    return json{{"orrery.io/tpu-slice-name", slice},
                {"orrery.io/tpu-pod-type", "v4-16"},
                {"orrery.io/tpu-topology", "2x2x2"},
                {"orrery.io/accelerator-type", "TPU-V4"},
                {"orrery.io/tpu-worker-id", worker}};
  };
  Tables t;
  t.nodes[kN1] = Node(kN1, true, {{"TPU", 4.0}}, labels("slice-b", "1"));
  t.nodes[kN2] = Node(kN2, true, {{"TPU", 4.0}}, labels("slice-b", "0"));
  t.nodes[kN3] = Node(kN3, false, {{"TPU", 4.0}}, labels("slice-a", "0"));
  t.nodes[Id('4')] = Node(Id('4'), true, {{"CPU", 4.0}});  // not a TPU host
  json slices = ClusterResponse(kOk, t)["tpu_slices"];
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0]["name"], "slice-a");
  EXPECT_EQ(slices[0]["hosts"].size(), 1u);
  EXPECT_EQ(slices[0]["hosts"][0]["alive"], false);
  const json& b = slices[1];
  EXPECT_EQ(b["name"], "slice-b");
  EXPECT_EQ(b["pod_type"], "v4-16");
  EXPECT_EQ(b["topology"], "2x2x2");
  EXPECT_EQ(b["accelerator_type"], "TPU-V4");
  ASSERT_EQ(b["hosts"].size(), 2u);
  EXPECT_EQ(b["hosts"][0], (json{{"node_id", kN2},
                                 {"address", "tcp://127.0.0.1:12222"},
                                 {"worker_id", 0},
                                 {"alive", true}}));
  EXPECT_EQ(b["hosts"][1]["node_id"], kN1);
  EXPECT_EQ(b["hosts"][1]["worker_id"], 1);
}

TEST(DashboardApi, NodesCarryUsedForEveryResource) {
  json r = NodesResponse(kOk, ClusterTables());
  ASSERT_EQ(r["nodes"].size(), 3u);
  const json& n1 = r["nodes"][0];
  EXPECT_EQ(n1["node_id"], kN1);
  EXPECT_EQ(n1["total"]["CPU"], 4.0);  // the record as stored
  EXPECT_EQ(n1["used"], (json{{"CPU", 2}, {"memory", 0}}));
  EXPECT_EQ(r["nodes"][1]["used"], (json{{"CPU", 0.5}, {"GPU", 1}}));
  EXPECT_EQ(n1["object_store"], (json{{"capacity_bytes", 8192},
                                      {"used_bytes", 4096},
                                      {"spilled_bytes", 0},
                                      {"num_objects", 3}}));
}

TEST(DashboardApi, ANodesObjectStoreReadsAsZeroUnlessAWholeNumber) {
  Tables t;
  t.nodes[kN1] = Node(kN1, true, {{"CPU", 1.0}});  // an older head's record: no store fields
  json bad = json::parse(WithStore(Node(kN2, true, {{"CPU", 1.0}}), 0, 0, 0, 0));
  bad["object_store_capacity_bytes"] = "8 GiB";
  bad["object_store_used_bytes"] = -5;
  bad["object_store_spilled_bytes"] = 1e300;
  bad["object_store_num_objects"] = 2.7;
  t.nodes[kN2] = bad.dump();
  json zero = {{"capacity_bytes", 0}, {"used_bytes", 0}, {"spilled_bytes", 0}, {"num_objects", 0}};
  json r = NodesResponse(kOk, t);
  ASSERT_EQ(r["nodes"].size(), 2u);
  EXPECT_EQ(r["nodes"][0]["object_store"], zero);
  json two = zero;
  two["num_objects"] = 2;
  EXPECT_EQ(r["nodes"][1]["object_store"], two);
  EXPECT_EQ(ClusterResponse(kOk, t)["object_store"], two);
}

TEST(DashboardApi, ListsAreRecordsInIdOrder) {
  Tables t = ClusterTables();
  t.actors[Id('0')] = "{broken";
  json r = ListResponse(kOk, "actors", t.actors);
  ASSERT_EQ(r["actors"].size(), 6u);
  EXPECT_EQ(r["actors"][0]["actor_id"], Id('1'));
  EXPECT_EQ(r["actors"][0]["class"], "Counter");
  EXPECT_TRUE(r["redis"]["ok"]);
  EXPECT_EQ(ListResponse(kOk, "jobs", {})["jobs"], json::array());
}

TEST(DashboardApi, RunsNewestFirst) {
  Table runs;
  runs[Id('1')] = json{{"id", Id('1')}, {"start_time", 100.0}}.dump();
  runs[Id('2')] = json{{"id", Id('2')}, {"start_time", 300.5}}.dump();
  runs[Id('3')] = json{{"id", Id('3')}, {"start_time", 200}}.dump();
  runs[Id('4')] = "not json";
  json r = RunsResponse(kOk, runs);
  ASSERT_EQ(r["runs"].size(), 3u);
  EXPECT_EQ(r["runs"][0]["id"], Id('2'));
  EXPECT_EQ(r["runs"][1]["id"], Id('3'));
  EXPECT_EQ(r["runs"][2]["id"], Id('1'));
}

TEST(DashboardApi, RunDetailParsesMetrics) {
  std::vector<StreamEntry> stream = {
      {"1-0",
       {{"iteration", "1"},
        {"time", "1795424045.5"},
        {"metrics", R"({"loss":0.5,"step":1.0})"},
        {"checkpoint", ""}}},
      {"2-0", {{"iteration", "x"}, {"time", "1"}, {"metrics", "{}"}}},     // bad iteration
      {"3-0", {{"iteration", "3"}, {"time", "2"}, {"metrics", "{oops"}}},  // bad metrics
      {"4-0",
       {{"iteration", "4"},
        {"time", "3"},
        {"metrics", R"({"loss":null})"},
        {"checkpoint", "/c/4"}}},
  };
  json r = RunResponse(kOk, json{{"id", Id('1')}, {"status", "RUNNING"}}.dump(), stream);
  EXPECT_EQ(r["run"]["status"], "RUNNING");
  ASSERT_EQ(r["metrics"].size(), 2u);
  EXPECT_EQ(r["metrics"][0], (json{{"iteration", 1},
                                   {"time", 1795424045.5},
                                   {"metrics", {{"loss", 0.5}, {"step", 1.0}}},
                                   {"checkpoint", ""}}));
  EXPECT_TRUE(r["metrics"][0]["iteration"].is_number_integer());
  EXPECT_EQ(r["metrics"][1]["iteration"], 4);
  EXPECT_TRUE(r["metrics"][1]["metrics"]["loss"].is_null());
  EXPECT_EQ(r["metrics"][1]["checkpoint"], "/c/4");
}

TEST(DashboardApi, RunDetailWithBadRecordHasNullRun) {
  json r = RunResponse(kOk, "{{{", {});
  EXPECT_TRUE(r["run"].is_null());
  EXPECT_EQ(r["metrics"], json::array());
}

TEST(DashboardApi, LogsKeepTheirTextAndKnownFieldsOnly) {
  std::vector<StreamEntry> stream = {
      {"1795424045500000-1",
       {{"stream", "stdout"}, {"text", "hello\nworld"}, {"pid", "7"}, {"secret", "not shown"}}},
      {"garbage", {{"stream", "stderr"}, {"text", "<b>oops</b>"}}}};
  json r = LogsResponse(kOk, json{{"submission_id", "job_1"}, {"state", "RUNNING"}}.dump(), stream);
  EXPECT_EQ(r["submission"]["state"], "RUNNING");
  ASSERT_EQ(r["logs"].size(), 2u);
  EXPECT_EQ(r["logs"][0]["text"], "hello\nworld");
  EXPECT_EQ(r["logs"][0]["pid"], "7");
  EXPECT_DOUBLE_EQ(r["logs"][0]["time"].get<double>(), 1795424045.5);
  EXPECT_FALSE(r["logs"][0].contains("secret"));
  EXPECT_EQ(r["logs"][1]["time"], 0.0);  // an id that is no number: time 0, entry kept
  EXPECT_TRUE(LogsResponse(kOk, "{{{", {})["submission"].is_null());
}

TEST(DashboardApi, RedisDownGivesEmptyBodies) {
  RedisState down{"127.0.0.1:1", false, "cannot connect"};
  json c = ClusterResponse(down, Tables{});
  EXPECT_EQ(c["redis"],
            (json{{"address", "127.0.0.1:1"}, {"ok", false}, {"error", "cannot connect"}}));
  EXPECT_EQ(c["nodes"], (json{{"alive", 0}, {"dead", 0}}));
  EXPECT_EQ(c["resources"], json::object());
  EXPECT_EQ(NodesResponse(down, Tables{})["nodes"], json::array());
  EXPECT_EQ(ErrorResponse("nope"), (json{{"error", "nope"}}));
}

// Routing, with no Redis configured (every API answer then says redis.ok=false).
TEST(DashboardRoutes, ApiWithoutRedisAnswers200WithOkFalse) {
  for (const char* path :
       {"/api/cluster", "/api/nodes", "/api/actors", "/api/placement_groups", "/api/jobs",
        "/api/runs", "/api/runs/0123456789abcdef0123456789abcdef"}) {
    HttpReply r = HandleRequest("GET", path, nullptr, "");
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.content_type.rfind("application/json", 0), 0u) << path;
    json body = json::parse(r.body);
    EXPECT_EQ(body["redis"]["ok"], false) << path;
    EXPECT_FALSE(body["redis"]["error"].get<std::string>().empty()) << path;
  }
}

TEST(DashboardRoutes, UnknownPathsAnd404s) {
  for (const char* path : {"/api/nope", "/api", "/api/runs/xyz",
                           "/api/runs/0123456789ABCDEF0123456789ABCDEF", "/api/nodes/extra"}) {
    HttpReply r = HandleRequest("GET", path, nullptr, "");
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_TRUE(json::parse(r.body).contains("error")) << path;
  }
  for (const char* path : {"/nope", "/runs/zz", "/static/other.js", "/index.html", "/nodes/"}) {
    EXPECT_EQ(HandleRequest("GET", path, nullptr, "").status, 404) << path;
  }
}

TEST(DashboardRoutes, PagesAndAssets) {
  for (const char* path : {"/", "/nodes", "/actors", "/placement-groups", "/jobs", "/runs",
                           "/runs/0123456789abcdef0123456789abcdef"}) {
    HttpReply r = HandleRequest("GET", path, nullptr, "");
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.content_type, "text/html; charset=utf-8") << path;
    EXPECT_NE(r.body.find("<html"), std::string::npos) << path;
  }
  HttpReply js = HandleRequest("GET", "/static/app.js", nullptr, "");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_FALSE(js.body.empty());
  HttpReply css = HandleRequest("HEAD", "/static/app.css", nullptr, "");
  EXPECT_EQ(css.status, 200);
  EXPECT_EQ(css.content_type, "text/css; charset=utf-8");
}

TEST(DashboardRoutes, OnlyReads) {
  for (const char* method : {"POST", "PUT", "DELETE", "PATCH"}) {
    HttpReply r = HandleRequest(method, "/api/nodes", nullptr, "");
    EXPECT_EQ(r.status, 405) << method;
    EXPECT_EQ(r.headers["Allow"], "GET, HEAD");
    EXPECT_EQ(HandleRequest(method, "/", nullptr, "").status, 405) << method;
  }
}

TEST(DashboardRedisReader, BadAddressAndUnreachableRedisAreStatuses) {
  RedisReader bad("no-port-here");
  EXPECT_EQ(bad.GetTable("nodes").status().code(), StatusCode::kInvalidArgument);
  // Port 1 on loopback: nothing listens there, so the connection is refused at once.
  RedisReader down("127.0.0.1:1", "default", 200);
  auto t = down.GetTable("nodes");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(t.status().message().find("127.0.0.1:1"), std::string::npos);
  EXPECT_FALSE(down.RunMetrics(Id('1')).ok());  // and again: it reconnects on each call
}

}  // namespace
}  // namespace orrery::dashboard
