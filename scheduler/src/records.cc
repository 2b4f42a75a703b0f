#include "scheduler/src/records.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "core/internal/file_hash.h"
#include "orrery/placement.h"

namespace orrery::scheduler::records {

using nlohmann::json;

// ------------------------------------------------------------------ strings

namespace {
bool IsHexId(const std::string& s) {
  if (s.size() != UniqueId::kSize * 2) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

Status Invalid(const std::string& what) { return Status::InvalidArgument(what); }

// A resource set read back: names UTF-8 and non-empty, amounts finite and not negative.
Status CheckStoredResources(const std::string& what, const Resources& r) {
  for (const auto& [name, amount] : r) {
    if (name.empty() || !std::isfinite(amount) || amount < 0)
      return Invalid(what + " has a bad entry");
  }
  return CheckUtf8(what, r);
}

template <typename T>
Result<T> DecodeHexMsgpack(const json& j, const char* field, const char* what) {
  auto bytes = FromHex(j.at(field).get<std::string>());
  if (!bytes.ok()) return Invalid(std::string(what) + ": " + bytes.status().message());
  T out;
  Status s = proto::DecodeMeta(bytes.value(), &out);
  if (!s.ok()) return Invalid(std::string(what) + ": " + s.message());
  return out;
}

// An integer field of a record, or `dflt` when it is absent. Anything else (a string, a
// fraction, a number outside T's range) throws, which ParseWith turns into InvalidArgument:
// nlohmann's own conversion of an out-of-range number to int is undefined behaviour.
template <typename T>
T IntField(const json& j, const char* key, T dflt) {
  auto it = j.find(key);
  if (it == j.end()) return dflt;
  bool fits = false;
  if (it->is_number_unsigned()) {
    fits = it->get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max());
  } else if (it->is_number_integer()) {
    int64_t v = it->get<int64_t>();
    fits =
        v >= int64_t(std::numeric_limits<T>::min()) && v <= int64_t(std::numeric_limits<T>::max());
  }
  if (!fits) throw std::invalid_argument(std::string("'") + key + "' is not an integer in range");
  return it->is_number_unsigned() ? T(it->get<uint64_t>()) : T(it->get<int64_t>());
}

// A count or size of a record that is informational (the head acts on none of them): its
// value when it is a number in [0, max] (a fraction is truncated), else 0. Never throws.
uint64_t CountField(const json& j, const char* key, uint64_t max) {
  auto it = j.find(key);
  if (it == j.end()) return 0;
  if (it->is_number_unsigned()) {
    uint64_t v = it->get<uint64_t>();
    return v <= max ? v : 0;
  }
  if (it->is_number_integer()) {
    int64_t v = it->get<int64_t>();
    return v >= 0 && uint64_t(v) <= max ? uint64_t(v) : 0;
  }
  if (it->is_number_float()) {
    double v = it->get<double>();
    return std::isfinite(v) && v >= 0 && v <= double(max) ? uint64_t(v) : 0;
  }
  return 0;
}

// A record's end_time: a finite number above 0, else 0 (none; docs/redis-schema.md "Retention").
double EndTime(const json& j) {
  auto it = j.find("end_time");
  double t = it != j.end() && it->is_number() ? it->get<double>() : 0.0;
  return std::isfinite(t) && t > 0 ? t : 0.0;
}

// Parses and runs `body` on the object; any exception (a missing field, a wrong type) is
// InvalidArgument.
template <typename T, typename F>
Result<T> ParseWith(std::string_view text, const char* what, F body) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return Invalid(std::string("the ") + what + " record is not JSON (or not UTF-8)");
  if (!j.is_object()) return Invalid(std::string("the ") + what + " record is not a JSON object");
  try {
    return body(j);
  } catch (const std::exception& e) {
    return Invalid(std::string("the ") + what +
                   " record has a missing or mistyped field: " + e.what());
  }
}
}  // namespace

Status CheckUtf8(std::string_view what, std::string_view s) {
  if (IsUtf8(s)) return Status::Ok();
  return Status::InvalidArgument(std::string(what) + " is not valid UTF-8: \"" + EscapeUtf8(s) +
                                 "\"");
}

Status CheckUtf8(std::string_view what, const Resources& resources) {
  for (const auto& entry : resources) {
    if (Status s = CheckUtf8(std::string(what) + " resource name", entry.first); !s.ok()) return s;
  }
  return Status::Ok();
}

Status CheckUtf8(std::string_view what, const Labels& labels) {
  for (const auto& [k, v] : labels) {
    if (Status s = CheckUtf8(std::string(what) + " label key", k); !s.ok()) return s;
    if (Status s = CheckUtf8(std::string(what) + " label value", v); !s.ok()) return s;
  }
  return Status::Ok();
}

Status CheckActorSpec(const proto::ActorSpecMsg& spec) {
  const auto& o = spec.options;
  for (Status s :
       {CheckUtf8("the actor's class", spec.factory), CheckUtf8("the actor's name", o.name),
        CheckUtf8("the actor's namespace", o.namespace_),
        CheckUtf8("the actor's owner address", spec.owner), CheckUtf8("the actor's", o.resources),
        CheckUtf8("the actor's selector", o.label_selector)}) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string ToHex(std::string_view bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

Result<std::string> FromHex(std::string_view hex) {
  if (hex.size() % 2) return Invalid("hex text of odd length");
  auto value = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = value(hex[i]), lo = value(hex[i + 1]);
    if (hi < 0 || lo < 0) return Invalid("a character that is not a hex digit");
    out.push_back(char(hi * 16 + lo));
  }
  return out;
}

namespace {
constexpr std::pair<proto::ActorState, const char*> kActorStates[] = {
    {proto::ActorState::kPending, "PENDING"},
    {proto::ActorState::kAlive, "ALIVE"},
    {proto::ActorState::kRestarting, "RESTARTING"},
    {proto::ActorState::kDead, "DEAD"}};
}  // namespace

const char* ActorStateName(proto::ActorState s) {
  for (const auto& [state, name] : kActorStates)
    if (state == s) return name;
  return "UNKNOWN";
}

// ------------------------------------------------------------------ writing

namespace {
std::string HexOf(const std::string& binary_id) { return UniqueId::FromBinary(binary_id).Hex(); }
// "Counter::Create" -> "Counter": the class an actor factory makes.
std::string ClassOf(const std::string& factory) {
  size_t colon = factory.rfind("::");
  return colon == std::string::npos ? factory : factory.substr(0, colon);
}
constexpr const char* kPgStates[] = {"PENDING", "CREATED", "REMOVED"};
}  // namespace

std::string NodeRecordJson(const NodeRecord& r) {
  return Dump(json{{"node_id", r.id.Hex()},
                   {"address", r.address},
                   {"alive", r.alive},
                   {"total", r.total},
                   {"labels", r.labels},
                   {"memory_used_bytes", r.memory_used_bytes},
                   {"memory_total_bytes", r.memory_total_bytes},
                   {"memory_usage_threshold", r.memory_usage_threshold},
                   {"object_store_capacity_bytes", r.object_store_capacity_bytes},
                   {"object_store_used_bytes", r.object_store_used_bytes},
                   {"object_store_spilled_bytes", r.object_store_spilled_bytes},
                   {"object_store_num_objects", r.object_store_num_objects},
                   {"secret_sha256", r.secret_sha256},
                   {"end_time", r.end_time},
                   {"metrics_address", r.metrics_address}});
}

std::string ActorRecordJson(const ActorRecord& r) {
  const auto& o = r.spec.options;
  json j{
      {"actor_id", HexOf(r.spec.actor_id)},
      {"class", ClassOf(r.spec.factory)},
      {"state", ActorStateName(r.state)},
      {"name", o.name},
      {"namespace", o.namespace_},
      {"resources", o.resources},
      {"address", r.address},
      {"pid", r.pid},
      {"node_id", r.node_id},
      {"restarts", r.restarts_used},
      {"max_restarts", o.max_restarts},
      {"detached", o.lifetime == 1},
      {"death_cause", r.death_cause},
      {"death_kind", r.death_kind},
      {"job_id", HexOf(r.spec.job_id)},
      {"placement_group_id", o.placement_group.empty() ? std::string() : HexOf(o.placement_group)},
      {"incarnation", r.incarnation},
      {"bundle", r.bundle},
      {"kill_requested", r.kill_requested},
      {"subscribers", r.subscribers},
      {"end_time", r.end_time},
      {"spec", ToHex(internal::Pack(r.spec))}};
  return Dump(j);
}

std::string PgRecordJson(const PgRecord& r) {
  json j{{"placement_group_id", HexOf(r.spec.pg_id)},
         {"name", r.spec.name},
         {"strategy", PlacementStrategyName(PlacementStrategy(r.spec.strategy))},
         {"bundles", r.spec.bundles},
         {"bundle_nodes", r.bundle_nodes},
         {"state", kPgStates[r.state]},
         {"reason", r.reason},
         {"spec", ToHex(internal::Pack(r.spec))}};
  return Dump(j);
}

std::string JobRecordJson(const JobRecord& r) {
  json j{{"job_id", HexOf(r.info.job_id)},
         {"driver_address", r.info.driver_address},
         {"pid", r.info.pid},
         {"namespace", r.info.namespace_},
         {"entrypoint", r.info.entrypoint},
         {"executable_sha256", r.info.binary_hash},
         {"arch", r.info.arch},
         {"state", r.running ? "RUNNING" : "FINISHED"},
         {"start_time", r.start_time},
         {"end_cause", r.end_cause},
         {"end_time", r.end_time}};
  return Dump(j);
}

std::string LeaseRecordJson(const LeaseRecord& r) {
  json j{{"lease_id", HexOf(r.request.lease_id)},
         {"job_id", HexOf(r.request.job_id)},
         {"node_id", r.node_id},
         {"bundle", r.bundle},
         {"resources", r.request.resources},
         {"request", ToHex(internal::Pack(r.request))}};
  return Dump(j);
}

// ------------------------------------------------------------------ reading

Result<NodeRecord> ParseNodeRecord(std::string_view text) {
  return ParseWith<NodeRecord>(text, "node", [](const json& j) -> Result<NodeRecord> {
    NodeRecord r;
    std::string id = j.at("node_id").get<std::string>();
    if (!IsHexId(id)) return Invalid("the node record's node_id is not a 32-digit hex id");
    r.id = NodeId::FromHex(id);
    r.address = j.value("address", "");
    r.alive = j.value("alive", false);
    r.total = j.at("total").get<Resources>();
    r.labels = j.value("labels", Labels{});
    if (Status s = CheckStoredResources("the node's total", r.total); !s.ok()) return s;
    auto number = [&](const char* key, double max) {  // 0 unless a number in [0, max]
      auto it = j.find(key);
      double v = it != j.end() && it->is_number() ? it->get<double>() : 0.0;
      return std::isfinite(v) ? std::clamp(v, 0.0, max) : 0.0;
    };
    r.memory_used_bytes = int64_t(number("memory_used_bytes", 9e18));
    r.memory_total_bytes = int64_t(number("memory_total_bytes", 9e18));
    r.memory_usage_threshold = number("memory_usage_threshold", 1.0);
    r.object_store_capacity_bytes =
        CountField(j, "object_store_capacity_bytes", kMaxObjectStoreBytes);
    r.object_store_used_bytes =
        std::min(CountField(j, "object_store_used_bytes", kMaxObjectStoreBytes),
                 r.object_store_capacity_bytes);
    r.object_store_spilled_bytes =
        CountField(j, "object_store_spilled_bytes", kMaxObjectStoreBytes);
    r.object_store_num_objects = CountField(j, "object_store_num_objects", kMaxObjectStoreObjects);
    // Anything but 64 lowercase hex digits: unknown (the node's next heartbeat brings it).
    std::string hash = j.value("secret_sha256", "");
    bool hex = hash.size() == 64 && hash.find_first_not_of("0123456789abcdef") == std::string::npos;
    r.secret_sha256 = hex ? hash : "";
    r.end_time = EndTime(j);
    auto m = j.find("metrics_address");  // anything but a string of <= 256 bytes: none
    if (m != j.end() && m->is_string() && m->get_ref<const std::string&>().size() <= 256)
      r.metrics_address = m->get<std::string>();
    return r;
  });
}

Result<ActorRecord> ParseActorRecord(std::string_view text) {
  return ParseWith<ActorRecord>(text, "actor", [](const json& j) -> Result<ActorRecord> {
    ActorRecord r;
    auto spec = DecodeHexMsgpack<proto::ActorSpecMsg>(j, "spec", "the actor record's spec");
    if (!spec.ok()) return spec.status();
    r.spec = std::move(spec).value();
    if (r.spec.actor_id.size() != UniqueId::kSize ||
        UniqueId::FromBinary(r.spec.actor_id).IsNil()) {
      return Invalid("the actor record's spec has no valid actor id");
    }
    if (j.at("actor_id").get<std::string>() != HexOf(r.spec.actor_id)) {
      return Invalid("the actor record's actor_id differs from its spec's");
    }
    if (Status s = CheckActorSpec(r.spec); !s.ok()) return s;
    if (Status s = CheckStoredResources("the actor's resources", r.spec.options.resources); !s.ok())
      return s;
    std::string state = j.value("state", "PENDING");
    const auto* s = std::find_if(std::begin(kActorStates), std::end(kActorStates),
                                 [&](const auto& p) { return state == p.second; });
    if (s == std::end(kActorStates))
      return Invalid("the actor record's state is not one of PENDING, ALIVE, RESTARTING, DEAD");
    r.state = s->first;
    r.incarnation = IntField(j, "incarnation", 0);
    r.restarts_used = IntField(j, "restarts", 0);
    r.kill_requested = j.value("kill_requested", false);
    r.death_cause = j.value("death_cause", "");
    r.death_kind = j.value("death_kind", "");
    r.subscribers = j.value("subscribers", std::vector<std::string>{});
    r.node_id = j.value("node_id", "");
    r.bundle = IntField(j, "bundle", -1);
    r.address = j.value("address", "");
    r.pid = IntField(j, "pid", 0);
    r.end_time = EndTime(j);
    if (!r.node_id.empty() && !IsHexId(r.node_id))
      return Invalid("the actor record's node_id is not a hex id");
    if (r.incarnation < 0 || r.restarts_used < 0 || r.bundle < -1 || r.pid < 0) {
      return Invalid("the actor record has a negative count");
    }
    return r;
  });
}

Result<PgRecord> ParsePgRecord(std::string_view text) {
  return ParseWith<PgRecord>(text, "placement group", [](const json& j) -> Result<PgRecord> {
    PgRecord r;
    auto spec =
        DecodeHexMsgpack<proto::PlacementGroupMsg>(j, "spec", "the placement group record's spec");
    if (!spec.ok()) return spec.status();
    r.spec = std::move(spec).value();
    if (r.spec.pg_id.size() != UniqueId::kSize)
      return Invalid("the placement group record has no valid id");
    if (r.spec.bundles.empty() || r.spec.strategy < 0 || r.spec.strategy > 3) {
      return Invalid("the placement group record's spec has no bundles or an unknown strategy");
    }
    for (const auto& b : r.spec.bundles) {
      if (Status s = CheckStoredResources("a bundle", b); !s.ok()) return s;
    }
    if (Status s = CheckUtf8("the placement group's name", r.spec.name); !s.ok()) return s;
    std::string state = j.value("state", "PENDING");
    const auto* s = std::find(std::begin(kPgStates), std::end(kPgStates), state);
    if (s == std::end(kPgStates))
      return Invalid("the placement group record's state is not one of PENDING, CREATED, REMOVED");
    r.state = PgRecord::State(s - std::begin(kPgStates));
    r.bundle_nodes = j.value("bundle_nodes", std::vector<std::string>{});
    for (const auto& n : r.bundle_nodes) {
      if (!n.empty() && !IsHexId(n))
        return Invalid("the placement group record's bundle_nodes hold a bad id");
    }
    if (r.state == PgRecord::kCreated && r.bundle_nodes.size() != r.spec.bundles.size()) {
      return Invalid("a created placement group record must name a node for each bundle");
    }
    r.reason = j.value("reason", "");
    return r;
  });
}

Result<JobRecord> ParseJobRecord(std::string_view text) {
  return ParseWith<JobRecord>(text, "job", [](const json& j) -> Result<JobRecord> {
    JobRecord r;
    std::string id = j.at("job_id").get<std::string>();
    if (!IsHexId(id)) return Invalid("the job record's job_id is not a 32-digit hex id");
    r.info.job_id = UniqueId::FromHex(id).Binary();
    r.info.driver_address = j.value("driver_address", "");
    r.info.pid = IntField(j, "pid", 0);
    r.info.namespace_ = j.value("namespace", "");
    r.info.entrypoint = j.value("entrypoint", "");
    r.info.binary_hash = j.value("executable_sha256", "");
    if (!r.info.binary_hash.empty() && !IsContentHash(r.info.binary_hash))
      return Invalid("the job record's executable_sha256 is not 64 lowercase hex digits");
    r.info.arch = j.value("arch", "");
    r.running = j.value("state", "") == "RUNNING";
    r.start_time = j.value("start_time", 0.0);
    r.end_cause = j.value("end_cause", "");
    r.end_time = EndTime(j);
    return r;
  });
}

Result<LeaseRecord> ParseLeaseRecord(std::string_view text) {
  return ParseWith<LeaseRecord>(text, "lease", [](const json& j) -> Result<LeaseRecord> {
    LeaseRecord r;
    auto request =
        DecodeHexMsgpack<proto::LeaseRequestMsg>(j, "request", "the lease record's request");
    if (!request.ok()) return request.status();
    r.request = std::move(request).value();
    if (r.request.lease_id.size() != UniqueId::kSize)
      return Invalid("the lease record has no valid lease id");
    if (Status s = CheckStoredResources("the lease's resources", r.request.resources); !s.ok())
      return s;
    if (Status s = CheckUtf8("the lease's", r.request.label_selector); !s.ok()) return s;
    r.node_id = j.value("node_id", "");
    r.bundle = IntField(j, "bundle", -1);
    if (!r.node_id.empty() && !IsHexId(r.node_id))
      return Invalid("the lease record's node_id is not a hex id");
    if (r.bundle < -1) return Invalid("the lease record's bundle is negative");
    return r;
  });
}

}  // namespace orrery::scheduler::records
