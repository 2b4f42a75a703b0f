#include "dashboard/src/api.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/internal/labels.h"

namespace orrery::dashboard {

using nlohmann::json;

namespace {

// Accessors that never throw: a field of the wrong type reads as the default.
std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
double Num(const json& j, const char* key, double dflt = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : dflt;
}
bool Bool(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}
const json& Obj(const json& j, const char* key) {
  static const json kEmpty = json::object();
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : kEmpty;
}

// Adds the numeric entries of a resources object to `into`.
void AddAmounts(const json& resources, Amounts* into) {
  if (!resources.is_object()) return;
  for (const auto& [name, v] : resources.items()) {
    if (v.is_number()) (*into)[name] += v.get<double>();
  }
}

// Whole numbers print as integers (4, not 4.0), so the API is easy to read.
json Number(double v) {
  if (std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 9.0e15)
    return json(static_cast<int64_t>(v));
  return json(v);
}

json AmountsJson(const Amounts& a) {
  json out = json::object();
  for (const auto& [name, v] : a) out[name] = Number(v);
  return out;
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  *out = v;
  return true;
}

std::map<std::string, int> CountBy(const std::vector<json>& records, const char* key) {
  std::map<std::string, int> out;
  for (const auto& r : records) out[Str(r, key)]++;
  return out;
}

std::vector<json> Parse(const Table& table) { return ParseRecords(table); }

// A node's object store from its record's object_store_* fields: each a whole number of at
// least 0 (anything else reads as 0, as the head reads it).
json ObjectStore(const json& node) {
  auto count = [&](const char* key) -> json {
    double v = Num(node, key);
    return v >= 0 && v < 9.0e15 ? Number(std::floor(v)) : json(0);
  };
  return {{"capacity_bytes", count("object_store_capacity_bytes")},
          {"used_bytes", count("object_store_used_bytes")},
          {"spilled_bytes", count("object_store_spilled_bytes")},
          {"num_objects", count("object_store_num_objects")}};
}

}  // namespace

std::vector<json> ParseRecords(const Table& table) {
  std::vector<json> out;
  out.reserve(table.size());
  for (const auto& [id, text] : table) {
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

std::map<std::string, Amounts> UsedByNode(const Table& actors, const Table& placement_groups) {
  std::map<std::string, Amounts> used;
  std::map<std::string, bool> created;  // group id -> CREATED
  for (const auto& pg : Parse(placement_groups)) {
    bool is_created = Str(pg, "state") == "CREATED";
    created[Str(pg, "placement_group_id")] = is_created;
    if (!is_created) continue;
    auto bundles = pg.find("bundles");
    auto nodes = pg.find("bundle_nodes");
    if (bundles == pg.end() || nodes == pg.end() || !bundles->is_array() || !nodes->is_array())
      continue;
    for (size_t i = 0; i < bundles->size() && i < nodes->size(); ++i) {
      if ((*nodes)[i].is_string()) AddAmounts((*bundles)[i], &used[(*nodes)[i].get<std::string>()]);
    }
  }
  for (const auto& a : Parse(actors)) {
    std::string node = Str(a, "node_id");
    if (node.empty() || Str(a, "state") == "DEAD") continue;
    std::string pg = Str(a, "placement_group_id");
    if (!pg.empty() && created[pg]) continue;  // counted in its group's bundle
    AddAmounts(Obj(a, "resources"), &used[node]);
  }
  return used;
}

json TpuSlices(const std::vector<json>& nodes) {
  struct Host {
    int64_t worker_id;
    bool alive;
    json j;
  };
  struct Slice {
    json info;  // from the first alive host (else the first host)
    bool info_from_alive = false;
    std::vector<Host> hosts;
  };
  std::map<std::string, Slice> slices;
  for (const auto& n : nodes) {
    const json& labels = Obj(n, "labels");
    std::string name = Str(labels, kTpuSliceNameLabel);
    if (name.empty()) continue;
    Slice& s = slices[name];
    bool alive = Bool(n, "alive");
    if (s.info.is_null() || (alive && !s.info_from_alive)) {
      s.info = {{"name", name},
                {"pod_type", Str(labels, kTpuPodTypeLabel)},
                {"topology", Str(labels, kTpuTopologyLabel)},
                {"accelerator_type", Str(labels, kAcceleratorTypeLabel)}};
      s.info_from_alive = alive;
    }
    int64_t worker = -1;
    if (!ParseInt(Str(labels, kTpuWorkerIdLabel), &worker)) worker = -1;
    s.hosts.push_back({worker,
                       alive,
                       {{"node_id", Str(n, "node_id")},
                        {"address", Str(n, "address")},
                        {"worker_id", worker},
                        {"alive", alive}}});
  }
  json out = json::array();
  for (auto& [name, s] : slices) {
    std::stable_sort(s.hosts.begin(), s.hosts.end(), [](const Host& a, const Host& b) {
      return a.worker_id != b.worker_id ? a.worker_id < b.worker_id : a.alive > b.alive;
    });
    json hosts = json::array();
    for (auto& h : s.hosts) hosts.push_back(std::move(h.j));
    s.info["hosts"] = std::move(hosts);
    out.push_back(std::move(s.info));
  }
  return out;
}

json MetricsEntry(const StreamEntry& entry) {
  std::map<std::string, std::string> f(entry.fields.begin(), entry.fields.end());
  int64_t iteration = 0;
  if (!ParseInt(f["iteration"], &iteration)) return nullptr;
  json metrics = json::parse(f["metrics"], nullptr, /*allow_exceptions=*/false);
  if (!metrics.is_object()) return nullptr;
  double time = 0;
  json time_json = ParseDouble(f["time"], &time) ? json(time) : json(nullptr);
  return {{"iteration", iteration},
          {"time", time_json},
          {"metrics", std::move(metrics)},
          {"checkpoint", f["checkpoint"]}};
}

json RedisJson(const RedisState& redis) {
  return {{"address", redis.address},
          {"ok", redis.ok},
          {"error", redis.ok ? std::string() : redis.error}};
}

json ClusterResponse(const RedisState& redis, const Tables& tables) {
  std::vector<json> nodes = Parse(tables.nodes);
  auto used = UsedByNode(tables.actors, tables.placement_groups);
  int alive = 0, dead = 0;
  Amounts total, in_use;
  json store = ObjectStore(json::object());
  for (const auto& n : nodes) {
    if (!Bool(n, "alive")) {
      ++dead;
      continue;
    }
    ++alive;
    json node_store = ObjectStore(n);
    for (const auto& [key, v] : node_store.items())
      store[key] = Number(store[key].get<double>() + v.get<double>());
    Amounts node_total;
    AddAmounts(Obj(n, "total"), &node_total);
    for (const auto& [name, v] : node_total) total[name] += v;
    auto it = used.find(Str(n, "node_id"));
    if (it != used.end()) {
      for (const auto& [name, v] : it->second) in_use[name] += v;
    }
  }
  json resources = json::object();
  for (const auto& [name, t] : total) {
    auto it = in_use.find(name);
    resources[name] = {{"total", Number(t)}, {"used", Number(it == in_use.end() ? 0 : it->second)}};
  }
  for (const auto& [name, u] : in_use) {
    if (!total.count(name)) resources[name] = {{"total", 0}, {"used", Number(u)}};
  }
  return {{"redis", RedisJson(redis)},
          {"nodes", {{"alive", alive}, {"dead", dead}}},
          {"resources", std::move(resources)},
          {"object_store", std::move(store)},
          {"tpu_slices", TpuSlices(nodes)},
          {"actors", CountBy(Parse(tables.actors), "state")},
          {"runs", CountBy(Parse(tables.train_runs), "status")}};
}

json NodesResponse(const RedisState& redis, const Tables& tables) {
  auto used = UsedByNode(tables.actors, tables.placement_groups);
  json out = json::array();
  for (auto& n : Parse(tables.nodes)) {
    Amounts u;
    for (const auto& [name, v] : Obj(n, "total").items()) {
      if (v.is_number()) u[name] = 0;
    }
    auto it = used.find(Str(n, "node_id"));
    if (it != used.end()) {
      for (const auto& [name, v] : it->second) u[name] += v;
    }
    n["used"] = AmountsJson(u);
    n["object_store"] = ObjectStore(n);
    out.push_back(std::move(n));
  }
  return {{"redis", RedisJson(redis)}, {"nodes", std::move(out)}};
}

json ListResponse(const RedisState& redis, const std::string& member, const Table& table) {
  json out = json::array();
  for (auto& r : Parse(table)) out.push_back(std::move(r));
  return {{"redis", RedisJson(redis)}, {member, std::move(out)}};
}

json RunsResponse(const RedisState& redis, const Table& train_runs) {
  std::vector<json> runs = Parse(train_runs);
  std::stable_sort(runs.begin(), runs.end(), [](const json& a, const json& b) {
    double ta = Num(a, "start_time"), tb = Num(b, "start_time");
    return ta != tb ? ta > tb : Str(a, "id") > Str(b, "id");
  });
  return {{"redis", RedisJson(redis)}, {"runs", runs}};
}

json RunResponse(const RedisState& redis, const std::string& run_json,
                 const std::vector<StreamEntry>& metrics) {
  json run = json::parse(run_json, nullptr, /*allow_exceptions=*/false);
  if (!run.is_object()) run = nullptr;
  json entries = json::array();
  for (const auto& e : metrics) {
    json m = MetricsEntry(e);
    if (!m.is_null()) entries.push_back(std::move(m));
  }
  return {{"redis", RedisJson(redis)}, {"run", std::move(run)}, {"metrics", std::move(entries)}};
}

json LogsResponse(const RedisState& redis, const std::string& record_json,
                  const std::vector<StreamEntry>& entries) {
  json record = json::parse(record_json, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object()) record = nullptr;
  json logs = json::array();
  for (const auto& e : entries) {
    json entry = json::object();
    // The id is <ms * 1000 + n>-1 (docs/redis-schema.md): its time in seconds.
    entry["time"] = std::strtod(e.id.c_str(), nullptr) / 1e6;
    for (const auto& [field, value] : e.fields) {
      if (field == "text" || field == "stream" || field == "node" || field == "pid" ||
          field == "name" || field == "job" || field == "actor")
        entry[field] = value;
    }
    logs.push_back(std::move(entry));
  }
  return {
      {"redis", RedisJson(redis)}, {"submission", std::move(record)}, {"logs", std::move(logs)}};
}

json ErrorResponse(const std::string& message) { return {{"error", message}}; }

}  // namespace orrery::dashboard
