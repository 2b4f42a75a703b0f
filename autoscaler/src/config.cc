#include "autoscaler/src/config.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>

#include "core/internal/labels.h"
#include "core/internal/text.h"
#include "orrery/tpu.h"

namespace orrery::autoscaler {

namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;

struct Bad {
  std::string message;
};

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw Bad{where + ": " + what};
}

// Rejects keys not in `known`, naming them and the keys that are.
void OnlyKnown(const YAML::Node& map, const std::string& where,
               const std::set<std::string>& known) {
  if (!map.IsMap()) Fail(where, "must be a mapping (key: value lines)");
  for (const auto& kv : map) {
    std::string key = kv.first.as<std::string>();
    if (known.count(key)) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    Fail(where, "unknown field '" + text::EscapeControl(key) + "' (known: " + list + ")");
  }
}

template <typename T>
T Scalar(const YAML::Node& n, const std::string& where, const char* type) {
  if (!n.IsScalar()) Fail(where, std::string("must be ") + type);
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    Fail(where, std::string("must be ") + type + ", not '" + n.as<std::string>() + "'");
  }
}

double Number(const YAML::Node& n, const std::string& where, double lo, double hi) {
  double v = Scalar<double>(n, where, "a number");
  if (!(v >= lo && v <= hi))
    Fail(where, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return v;
}

int Count(const YAML::Node& n, const std::string& where) {
  long long v = Scalar<long long>(n, where, "a whole number");
  if (v < 0 || v > 10000) Fail(where, "must be between 0 and 10000");
  return int(v);
}

Resources ResourcesOf(const YAML::Node& n, const std::string& where) {
  if (!n.IsMap()) Fail(where, "must be a mapping like {CPU: 4}");
  Resources r;
  for (const auto& kv : n) {
    std::string name = kv.first.as<std::string>();
    r[name] = Number(kv.second, where + "." + name, 0, 1e15);
  }
  if (Status s = ValidateResources(r); !s.ok()) Fail(where, s.message());
  return r;
}

Labels LabelsOf(const YAML::Node& n, const std::string& where) {
  if (!n.IsMap()) Fail(where, "must be a mapping like {zone: a}");
  Labels l;
  for (const auto& kv : n) {
    std::string k = kv.first.as<std::string>();
    std::string v = Scalar<std::string>(kv.second, where + "." + k, "a string");
    if (!text::IsPrintableToken(k) || !text::IsPrintableToken(v) ||
        k.find_first_of(",=") != k.npos || v.find_first_of(",=") != v.npos)
      Fail(where, "label '" + text::EscapeControl(k) + "' must be printable, without ',' or '='");
    l[k] = v;
  }
  return l;
}

ProviderConfig ProviderOf(const YAML::Node& n, const std::string& where, ProviderConfig p) {
  OnlyKnown(n, where, {"type", "create", "delete", "timeout_s"});
  if (n["type"]) p.type = Scalar<std::string>(n["type"], where + ".type", "a string");
  if (p.type != "local" && p.type != "command")
    Fail(where + ".type", "must be local or command, not '" + text::EscapeControl(p.type) + "'");
  if (n["create"]) p.create = Scalar<std::string>(n["create"], where + ".create", "a string");
  if (n["delete"]) p.remove = Scalar<std::string>(n["delete"], where + ".delete", "a string");
  if (n["timeout_s"]) p.timeout_s = Number(n["timeout_s"], where + ".timeout_s", 1, 86400);
  return p;
}

TpuSlice TpuOf(const YAML::Node& n, const std::string& where) {
  OnlyKnown(n, where, {"accelerator_type", "topology", "hosts"});
  if (!n["accelerator_type"] || !n["topology"])
    Fail(where, "needs accelerator_type (a pod type like v4-16) and topology (like 2x2x2)");
  std::string type =
      Scalar<std::string>(n["accelerator_type"], where + ".accelerator_type", "a string");
  std::string topology = Scalar<std::string>(n["topology"], where + ".topology", "a string");
  auto pod = tpu::ParsePodType(type);
  auto gen =
      pod.ok() ? Result<tpu::Generation>(pod.value().generation) : tpu::ParseAcceleratorType(type);
  if (!gen.ok()) Fail(where + ".accelerator_type", gen.status().message());
  auto shape = tpu::SliceFromTopology(gen.value(), topology);
  if (!shape.ok()) Fail(where + ".topology", shape.status().message());
  const tpu::SliceShape& s = shape.value();
  if (pod.ok() && pod.value().name != s.pod_type)
    Fail(where, "topology " + topology + " makes a " + s.pod_type + " slice, not " +
                    pod.value().name + ": change one of them");
  int hosts = s.hosts;
  if (n["hosts"]) {
    hosts = Count(n["hosts"], where + ".hosts");
    if (hosts != s.hosts)
      Fail(where + ".hosts", "a " + s.pod_type + " slice (topology " + s.topo.ToString() +
                                 ") has " + std::to_string(s.hosts) + " host(s), not " +
                                 std::to_string(hosts) + ": set hosts: " + std::to_string(s.hosts) +
                                 " or leave it out");
  }
  return {s.pod_type, s.topo.ToString(), tpu::AcceleratorTypeName(s.gen), hosts, s.chips_per_host};
}

GroupConfig GroupOf(const YAML::Node& n, const std::string& where, const ProviderConfig& p) {
  OnlyKnown(n, where,
            {"name", "resources", "labels", "min", "max", "idle_timeout_s", "tpu", "provider"});
  GroupConfig g;
  if (!n["name"]) Fail(where, "needs a name");
  g.name = Scalar<std::string>(n["name"], where + ".name", "a string");
  if (g.name.empty() || g.name.size() > 63 ||
      g.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
    Fail(where + ".name", "must be 1-63 of a-z, 0-9 and '-' (it names nodes and slices)");
  std::string at = "group '" + g.name + "'";
  if (n["resources"]) g.resources = ResourcesOf(n["resources"], at + ".resources");
  if (n["labels"]) g.labels = LabelsOf(n["labels"], at + ".labels");
  if (n["min"]) g.min = Count(n["min"], at + ".min");
  if (!n["max"]) Fail(at, "needs max (the most nodes, or slices, it may have)");
  g.max = Count(n["max"], at + ".max");
  if (g.max < g.min)
    Fail(at, "max (" + std::to_string(g.max) + ") is below min (" + std::to_string(g.min) +
                 "): raise max or lower min");
  if (n["idle_timeout_s"])
    g.idle_timeout_s = Number(n["idle_timeout_s"], at + ".idle_timeout_s", 0, 1e7);
  g.provider = n["provider"] ? ProviderOf(n["provider"], at + ".provider", p) : p;
  if (n["tpu"]) {
    g.is_tpu = true;
    g.tpu = TpuOf(n["tpu"], at + ".tpu");
    g.resources["TPU"] = g.tpu.chips_per_host;
  }
  if (g.resources.empty()) Fail(at, "needs resources (the node shape, like {CPU: 4})");
  if (g.provider.type == "command" && (g.provider.create.empty() || g.provider.remove.empty()))
    Fail(at + ".provider", "a command provider needs both create and delete commands");
  return g;
}

Config Parse(const YAML::Node& root) {
  OnlyKnown(root, "the config", {"interval_s", "launch_timeout_s", "provider", "groups"});
  Config c;
  if (root["interval_s"]) c.interval_s = Number(root["interval_s"], "interval_s", 0.1, 3600);
  if (root["launch_timeout_s"])
    c.launch_timeout_s = Number(root["launch_timeout_s"], "launch_timeout_s", 1, 86400);
  ProviderConfig p;
  if (root["provider"]) p = ProviderOf(root["provider"], "provider", p);
  const YAML::Node& groups = root["groups"];
  if (!groups || !groups.IsSequence() || groups.size() == 0)
    Fail("the config", "needs groups: a list of node groups (name, resources, min, max)");
  std::set<std::string> names;
  for (size_t i = 0; i < groups.size(); ++i) {
    GroupConfig g = GroupOf(groups[i], "groups[" + std::to_string(i) + "]", p);
    if (!names.insert(g.name).second) Fail("group '" + g.name + "'", "is named twice");
    c.groups.push_back(std::move(g));
  }
  return c;
}

}  // namespace

proto::AutoscalerGroupMsg GroupConfig::Shape() const {
  proto::AutoscalerGroupMsg m;
  m.name = name;
  m.resources = resources;
  m.labels = labels;
  m.labels[kGroupLabel] = name;
  m.max_nodes = max * hosts();
  m.hosts = hosts();
  if (is_tpu) {
    m.labels[kAcceleratorTypeLabel] = tpu.accelerator_type;
    m.labels[kTpuPodTypeLabel] = tpu.pod_type;
    m.labels[kTpuTopologyLabel] = tpu.topology;
    m.head_resources["TPU-" + tpu.pod_type + "-head"] = 1;
  }
  return m;
}

Result<Config> ParseConfig(const std::string& yaml_text) {
  if (yaml_text.size() > kMaxConfigBytes)
    return Status::InvalidArgument("the config is over 1 MiB");
  try {
    return Parse(YAML::Load(yaml_text));
  } catch (const Bad& b) {
    return Status::InvalidArgument(b.message);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("not valid YAML: ") + e.what());
  }
}

Result<Config> LoadConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read the autoscaler config " + path);
  std::ostringstream text;
  text << in.rdbuf();
  auto c = ParseConfig(text.str());
  if (!c.ok()) return Status::InvalidArgument(path + ": " + c.status().message());
  return c;
}

}  // namespace orrery::autoscaler
