#include "cli/src/inspect.h"

#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/src/list_objects.h"
#include "cli/src/list_workers.h"
#include "cli/src/objects_table.h"
#include "core/internal/labels.h"
#include "core/internal/redis_store.h"
#include "core/internal/text.h"
#include "orrery/orrery.h"
#include "orrery/resources.h"
#include "orrery/tpu.h"

namespace orrery::cli {

namespace {

std::string Used(const Resources& total, const Resources& available) {
  std::string out;
  for (const auto& [name, t] : total) {
    auto it = available.find(name);
    double used = t - (it == available.end() ? 0 : it->second);
    char buf[128];
    if (name == "memory") {
      std::snprintf(buf, sizeof(buf), "%s %.1f/%.1f GiB", name.c_str(), used / (1 << 30),
                    t / (1 << 30));
    } else {
      std::snprintf(buf, sizeof(buf), "%s %g/%g", name.c_str(), used, t);
    }
    out += (out.empty() ? "" : ", ") + std::string(buf);
  }
  return out;
}

// "TPU-V4 v4-16 2x2x2, slice slice-a worker 0, 32 GiB HBM/chip" from a node's labels.
std::string Accelerators(const Labels& labels) {
  auto get = [&](const char* k) {
    auto it = labels.find(k);
    return it == labels.end() ? std::string() : it->second;
  };
  std::string type = get(kAcceleratorTypeLabel);
  if (type.empty()) return "";
  std::string out = type;
  std::string pod = get(kTpuPodTypeLabel);
  if (!pod.empty()) out += " " + pod;
  std::string topo = get(kTpuTopologyLabel);
  if (!topo.empty()) out += " " + topo;
  std::string slice = get(kTpuSliceNameLabel);
  if (!slice.empty()) out += ", slice " + slice + " worker " + get(kTpuWorkerIdLabel);
  if (auto gen = tpu::ParseAcceleratorType(type); gen.ok()) {
    char hbm[64];
    std::snprintf(hbm, sizeof(hbm), ", %.0f GiB HBM/chip",
                  double(tpu::HbmBytesPerChip(gen.value())) / (1ll << 30));
    out += hbm;
  }
  return out;
}

// "memory in use 12.00/16.00 GiB (75.0%), threshold 0.95" from the node's memory monitor.
std::string MemoryLine(const nlohmann::json& n) {
  double used = n.value("memory_used_bytes", 0.0), total = n.value("memory_total_bytes", 0.0);
  double threshold = n.value("memory_usage_threshold", 0.0);
  char buf[160];
  if (total <= 0) {
    std::snprintf(buf, sizeof(buf), "memory in use unknown, threshold %g", threshold);
  } else {
    std::snprintf(buf, sizeof(buf), "memory in use %.2f/%.2f GiB (%.1f%%), threshold %g",
                  used / (1 << 30), total / (1 << 30), 100 * used / total, threshold);
  }
  return buf;
}

// "objects: 1.2 GiB / 7.0 GiB (3 objects, 0 B spilled)" from the node's object store.
std::string ObjectStoreLine(const nlohmann::json& n) {
  auto count = [&](const char* key) {
    int64_t v = n.value(key, int64_t(0));
    return v > 0 ? uint64_t(v) : 0;
  };
  proto::ObjectStoreUsageMsg u{
      count("object_store_capacity_bytes"), count("object_store_used_bytes"),
      count("object_store_spilled_bytes"), count("object_store_num_objects")};
  return "objects: " + StoreUsage(u);
}

nlohmann::json NodesJson() {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& n : Nodes()) {
    out.push_back({{"node_id", n.node_id.Hex()},
                   {"address", n.address},
                   {"alive", n.alive},
                   {"suspected", n.suspected},
                   {"total", n.total},
                   {"available", n.available},
                   {"labels", n.labels},
                   {"memory_used_bytes", n.memory_used_bytes},
                   {"memory_total_bytes", n.memory_total_bytes},
                   {"memory_usage_threshold", n.memory_usage_threshold},
                   {"object_store_used_bytes", n.object_store_used_bytes},
                   {"object_store_capacity_bytes", n.object_store_capacity_bytes},
                   {"object_store_spilled_bytes", n.object_store_spilled_bytes},
                   {"object_store_num_objects", n.object_store_num_objects}});
  }
  return out;
}

nlohmann::json Table(const std::string& redis, const std::string& password,
                     const std::string& table) {
  nlohmann::json out = nlohmann::json::array();
  if (redis.empty()) return out;
  auto store = RedisStateStore::Connect(redis, "default", password);
  if (!store.ok()) throw ConnectionError(store.status().message());  // it names the address
  auto records = store.value()->GetAll(table);
  if (!records.ok()) throw ConnectionError(records.status().message());
  for (const auto& [id, value] : records.value()) {
    try {
      out.push_back(nlohmann::json::parse(value));
    } catch (const std::exception&) {
      out.push_back({{"id", id}, {"error", "unparsable record"}});
    }
  }
  return out;
}

// "HH:MM:SS" (UTC) of seconds since the epoch.
std::string TimeText(double t) {
  time_t secs = time_t(t);
  tm utc{};
  gmtime_r(&secs, &utc);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &utc);
  return buf;
}

// The autoscaler's groups and its latest decisions (its record in the "autoscaler" table).
void PrintAutoscalerOrThrow(const nlohmann::json& status) {
  std::cout << "\nAutoscaler\n";
  for (const auto& g : status.value("groups", nlohmann::json::array())) {
    if (!g.is_object()) continue;
    std::cout << "  group " << text::EscapeControl(g.value("name", "?")) << " "
              << text::EscapeControl(g.value("shape", "")) << ": " << g.value("nodes", 0) << " "
              << g.value("unit", "node") << "(s), " << g.value("launching", 0) << " launching (min "
              << g.value("min", 0) << ", max " << g.value("max", 0) << ")";
    if (!g.value("error", "").empty())
      std::cout << "  last error: " << text::EscapeControl(g.value("error", ""));
    std::cout << "\n";
  }
  auto events = status.value("events", nlohmann::json::array());
  size_t first = events.size() > 10 ? events.size() - 10 : 0;
  for (size_t i = first; i < events.size(); ++i) {
    const auto& e = events[i];
    if (!e.is_object()) continue;
    std::cout << "  " << TimeText(e.value("time", 0.0)) << " "
              << text::EscapeControl(e.value("action", "")) << " " << e.value("count", 0) << " "
              << text::EscapeControl(e.value("group", "")) << ": "
              << text::EscapeControl(e.value("reason", "")) << "\n";
  }
  for (const auto& u : status.value("unsatisfiable", nlohmann::json::array()))
    if (u.is_string())
      std::cout << "  no group can hold " << text::EscapeControl(u.get<std::string>()) << "\n";
}

// The status is Redis's (untrusted): a field of another type ends the listing with a note.
void PrintAutoscaler(const nlohmann::json& status) {
  if (!status.is_object()) return;
  try {
    PrintAutoscalerOrThrow(status);
  } catch (const std::exception&) {
    std::cout << "  (the rest of the autoscaler's record is unreadable)\n";
  }
}

bool Connect(const InspectFlags& flags) {
  if (flags.address.empty()) {
    std::cerr
        << "orrery: no cluster found on this host; pass --address HOST:PORT (or start one with "
           "`orrery start --head`)\n";
    return false;
  }
  Config c;
  c.address = flags.address;
  c.log_level = "error";
  setenv("ORRERY_CLIENT_ONLY", "1", 1);  // inspecting is not a job
  Init(c);
  return true;
}

}  // namespace

int PrintStatus(const InspectFlags& flags) {
  if (!Connect(flags)) return 1;
  nlohmann::json nodes = NodesJson();
  nlohmann::json actors = Table(flags.redis_address, flags.redis_password, "actors");
  nlohmann::json pgs = Table(flags.redis_address, flags.redis_password, "placement_groups");
  nlohmann::json pending = Table(flags.redis_address, flags.redis_password, "pending");
  nlohmann::json scaler = Table(flags.redis_address, flags.redis_password, "autoscaler");
  if (flags.json) {
    std::cout << nlohmann::json{{"nodes", nodes},
                                {"actors", actors},
                                {"placement_groups", pgs},
                                {"pending", pending},
                                {"autoscaler", scaler.empty() ? nlohmann::json() : scaler[0]}}
                     .dump(2)
              << "\n";
    Shutdown();
    return 0;
  }
  std::cout << "Cluster at " << flags.address << "\n\nNodes\n";
  for (const auto& n : nodes) {
    std::cout << "  " << n["node_id"].get<std::string>().substr(0, 12) << "  "
              << (!n["alive"].get<bool>()       ? "DEAD     "
                  : n.value("suspected", false) ? "SUSPECTED"
                                                : "ALIVE    ")
              << "  " << n["address"].get<std::string>() << "  "
              << Used(n["total"].get<Resources>(), n["available"].get<Resources>()) << "\n";
    if (n["alive"].get<bool>()) {
      std::cout << "      " << MemoryLine(n) << "\n";
      std::cout << "      " << ObjectStoreLine(n) << "\n";
    }
    std::string accel = Accelerators(n["labels"].get<Labels>());
    if (!accel.empty()) std::cout << "      " << accel << "\n";
  }
  std::map<std::string, int> by_state;
  for (const auto& a : actors) by_state[a.value("state", "?")]++;
  std::cout << "\nActors\n";
  if (by_state.empty()) std::cout << "  (none)\n";
  for (const auto& [state, n] : by_state) std::cout << "  " << state << ": " << n << "\n";
  std::cout << "\nPending demands\n";
  if (pending.empty()) std::cout << "  (none)\n";
  for (const auto& p : pending) {
    std::cout << "  " << p.value("kind", "") << " " << p.value("demand", "") << ": "
              << p.value("reason", "") << "\n";
  }
  std::cout << "\nPlacement groups\n";
  if (pgs.empty()) std::cout << "  (none)\n";
  for (const auto& p : pgs) {
    std::cout << "  " << p.value("name", "") << " " << p.value("state", "") << " "
              << p.value("strategy", "");
    if (!p.value("reason", "").empty()) std::cout << "  (" << p.value("reason", "") << ")";
    std::cout << "\n";
  }
  if (!scaler.empty()) PrintAutoscaler(scaler[0]);
  Shutdown();
  return 0;
}

int List(const std::string& what, const InspectFlags& flags) {
  static const std::map<std::string, std::string> kTables = {
      {"actors", "actors"},
      {"placement-groups", "placement_groups"},
      {"jobs", "jobs"},
      {"runs", "train_runs"}};
  if (what != "nodes" && what != "objects" && what != "workers" && what != "tasks" &&
      !kTables.count(what)) {
    std::cerr << "orrery list: unknown kind '" << what
              << "' (supported: nodes, actors, placement-groups, jobs, runs, objects, workers, "
                 "tasks)\n";
    return 2;
  }
  if (!Connect(flags)) return 1;
  if (what == "tasks") {
    std::map<std::string, std::string> drivers;
    for (const auto& j : Table(flags.redis_address, flags.redis_password, "jobs")) {
      if (j.value("state", "") == "RUNNING")
        drivers[j.value("job_id", "")] = j.value("driver_address", "");
    }
    int rc = ListTasks(drivers, {flags.state, flags.node, flags.job}, flags.json);
    Shutdown();
    return rc;
  }
  if (what == "objects" || what == "workers") {
    int rc = what == "objects" ? ListObjects(flags.json)
                               : ListWorkers({flags.state, flags.node, flags.job}, flags.json);
    Shutdown();
    return rc;
  }
  nlohmann::json rows = what == "nodes"
                            ? NodesJson()
                            : Table(flags.redis_address, flags.redis_password, kTables.at(what));
  if (flags.json) {
    std::cout << rows.dump(2) << "\n";
  } else {
    for (const auto& r : rows) {
      if (what == "nodes") {
        std::cout << r["node_id"].get<std::string>() << "  "
                  << (r["alive"].get<bool>() ? "ALIVE" : "DEAD") << "  "
                  << r["address"].get<std::string>() << "  "
                  << Used(r["total"].get<Resources>(), r["available"].get<Resources>()) << "\n";
      } else if (what == "actors") {
        std::cout << r.value("actor_id", "") << "  " << r.value("state", "") << "  "
                  << r.value("class", "") << "  " << r.value("name", "") << "  "
                  << r.value("death_cause", "") << "\n";
      } else if (what == "runs") {
        std::cout << r.value("id", "") << "  " << r.value("name", "") << "  "
                  << r.value("status", "") << "  " << r.value("iterations", 0.0) << " iterations  "
                  << r.value("latest_metrics", nlohmann::json::object()).dump();
        if (!r.value("error", "").empty()) std::cout << "  " << r.value("error", "");
        std::cout << "\n";
      } else {
        std::cout << r.dump() << "\n";
      }
    }
    if (rows.empty()) std::cout << "(none)\n";
  }
  Shutdown();
  return 0;
}

}  // namespace orrery::cli
