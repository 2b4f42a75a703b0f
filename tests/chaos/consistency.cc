#include "tests/chaos/consistency.h"

#include <nlohmann/json.hpp>

namespace orrery_chaos {

using nlohmann::json;

namespace {

json Parse(const std::string& text) { return json::parse(text, nullptr, false); }

std::string Show(const orrery::Resources& r) { return json(r).dump(); }

orrery::Resources ResourcesOf(const json& j) {
  orrery::Resources out;
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items())
    if (v.is_number()) out[k] = v.get<double>();
  return out;
}

}  // namespace

std::vector<std::string> CompareNodes(const std::vector<orrery::NodeInfo>& head,
                                      const Records& redis) {
  std::vector<std::string> diffs;
  std::set<std::string> seen;
  for (const auto& n : head) {
    const std::string id = n.node_id.Hex();
    seen.insert(id);
    auto it = redis.find(id);
    if (it == redis.end()) {
      diffs.push_back("node " + id + " (alive " + std::to_string(n.alive) +
                      ") is known to the head, not to Redis");
      continue;
    }
    json r = Parse(it->second);
    if (!r.is_object()) {
      diffs.push_back("node " + id +
                      ": Redis holds an unparsable record: " + it->second.substr(0, 200));
      continue;
    }
    if (r.value("alive", !n.alive) != n.alive) {
      diffs.push_back("node " + id + ": alive is " + std::to_string(n.alive) + " for the head, " +
                      r["alive"].dump() + " in Redis");
    }
    if (ResourcesOf(r.value("total", json::object())) != n.total) {
      diffs.push_back("node " + id + ": total is " + Show(n.total) + " for the head, " +
                      r.value("total", json()).dump() + " in Redis");
    }
  }
  for (const auto& [id, text] : redis) {
    if (seen.count(id)) continue;
    json r = Parse(text);
    diffs.push_back("node " + id + " (alive " +
                    (r.is_object() ? r.value("alive", json()).dump() : "?") +
                    ") is in Redis, not known to the head");
  }
  return diffs;
}

std::vector<std::string> CompareNamedActors(
    const std::set<std::string>& names,
    const std::function<std::string(const std::string&)>& lookup, const Records& redis) {
  std::map<std::string, std::vector<std::string>> live_by_name;  // name -> ids not DEAD
  for (const auto& [id, text] : redis) {
    json r = Parse(text);
    if (!r.is_object()) continue;
    if (r.value("state", "") != "DEAD") live_by_name[r.value("name", "")].push_back(id);
  }
  std::vector<std::string> diffs;
  for (const auto& name : names) {
    std::string head_id = lookup(name);
    const auto& live = live_by_name[name];
    if (head_id.empty() && !live.empty()) {
      diffs.push_back("actor '" + name + "': the head has no live actor of that name, Redis has " +
                      live[0] + " not DEAD (" + std::to_string(live.size()) + " records)");
    } else if (!head_id.empty() && (live.size() != 1 || live[0] != head_id)) {
      diffs.push_back("actor '" + name + "': the head says " + head_id + ", Redis has " +
                      std::to_string(live.size()) + " records not DEAD" +
                      (live.empty() ? "" : " (" + live[0] + ")"));
    }
  }
  return diffs;
}

std::vector<std::string> UnsettledActors(const Records& redis, const std::set<int>& worker_pids) {
  std::vector<std::string> out;
  std::set<int> used;
  for (const auto& [id, text] : redis) {
    json r = Parse(text);
    if (!r.is_object()) {
      out.push_back("actor " + id + ": unparsable record");
      continue;
    }
    const std::string state = r.value("state", "");
    if (state == "DEAD") continue;
    const std::string what =
        "actor " + id + " (" + r.value("class", "") + " '" + r.value("name", "") + "')";
    int pid = r.value("pid", 0);
    if (state != "ALIVE") {
      out.push_back(what + " is " + state + ": " + r.value("death_cause", ""));
    } else if (!worker_pids.count(pid)) {
      out.push_back(what + " is ALIVE in Redis with pid " + std::to_string(pid) +
                    ", which is no worker of the cluster");
    } else if (!used.insert(pid).second) {
      out.push_back(what + " shares pid " + std::to_string(pid) + " with another ALIVE actor");
    }
  }
  return out;
}

std::set<int> AliveActorPids(const Records& redis) {
  std::set<int> out;
  for (const auto& [id, text] : redis) {
    json r = Parse(text);
    if (r.is_object() && r.value("state", "") == "ALIVE" && r.value("pid", 0) > 0)
      out.insert(r.value("pid", 0));
  }
  return out;
}

std::vector<std::string> NotDead(const Records& redis) {
  std::vector<std::string> out;
  for (const auto& [id, text] : redis) {
    json r = Parse(text);
    if (r.is_object() && r.value("state", "") == "DEAD") continue;
    out.push_back(id + " " +
                  (r.is_object() ? r.value("state", "?") + " " + r.value("class", "") + " '" +
                                       r.value("name", "") + "'"
                                 : "unparsable"));
  }
  return out;
}

}  // namespace orrery_chaos
