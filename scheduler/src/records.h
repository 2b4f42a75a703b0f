// The head's records in the state store (docs/redis-schema.md): how each one is written as
// JSON and read back. Everything read back is untrusted input (another process may have
// written Redis, or an older head, or a disk may have garbled it), so every Parse* function
// is pure, never throws and never crashes: a record that does not decode, has a field of
// the wrong type, an invalid id or a string that is not UTF-8 is InvalidArgument, naming
// what is wrong. The head skips such a record with a warning.
//
// Also here: the UTF-8 rules for strings that peers send. JSON (and so every record) holds
// only UTF-8; names, namespaces, labels and resource names must be UTF-8 and are refused
// otherwise, while free text that is legitimately arbitrary bytes (paths, error messages)
// is stored with each invalid byte escaped as the four characters \xNN.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/internal/protocol.h"
#include "core/internal/text.h"
#include "orrery/config.h"
#include "orrery/ids.h"
#include "orrery/status.h"

namespace orrery::scheduler::records {

// ---- strings

// IsUtf8 and EscapeUtf8 ("\xNN" for every byte of no valid UTF-8 sequence): core/internal/text.h.
using text::EscapeUtf8;
using text::IsUtf8;
// InvalidArgument "<what> is not valid UTF-8: <escaped>" unless `s` is UTF-8.
Status CheckUtf8(std::string_view what, std::string_view s);
Status CheckUtf8(std::string_view what, const Resources& resources);  // the names
Status CheckUtf8(std::string_view what, const Labels& labels);        // keys and values
// Every string of an actor spec that the head stores or shows.
Status CheckActorSpec(const proto::ActorSpecMsg& spec);
// The JSON text of `j`; never throws (invalid UTF-8, which the checks above keep out, would
// be written as U+FFFD).
std::string Dump(const nlohmann::json& j);

// ---- records (field names and meaning: docs/redis-schema.md)

// The largest object store figures the head keeps (what a node says beyond them is clamped,
// what a record holds beyond them reads as 0): far above any real store, far below where
// int64 and a JSON number's double lose meaning.
inline constexpr uint64_t kMaxObjectStoreBytes = uint64_t(1) << 60;
inline constexpr uint64_t kMaxObjectStoreObjects = uint64_t(1) << 40;

struct NodeRecord {
  NodeId id;
  std::string address;
  bool alive = false;
  Resources total;
  Labels labels;
  // What the node's last heartbeat said of its memory (0 when unknown).
  int64_t memory_used_bytes = 0;
  int64_t memory_total_bytes = 0;
  double memory_usage_threshold = 0;
  // What the node's last heartbeat said of its object store (0 when unknown or none).
  uint64_t object_store_capacity_bytes = 0;
  uint64_t object_store_used_bytes = 0;  // at most the capacity
  uint64_t object_store_spilled_bytes = 0;
  uint64_t object_store_num_objects = 0;
  // SHA-256 (64 hex) of the secret the node registered with, so that a restarted head knows
  // the node's own messages (its worker events) before its next heartbeat; "" when unknown.
  std::string secret_sha256;
  double end_time = 0;  // when it was marked dead, seconds since the epoch; 0 while alive
  // Where the node serves its metrics ("host:port", docs/metrics.md); "" when none or unknown.
  std::string metrics_address;
};

struct ActorRecord {
  proto::ActorSpecMsg spec;
  proto::ActorState state = proto::ActorState::kPending;
  int incarnation = 0;
  int restarts_used = 0;
  bool kill_requested = false;
  std::string node_id;  // hex, "" when not placed
  int bundle = -1;
  std::string address;
  int pid = 0;
  std::string death_kind, death_cause;
  std::vector<std::string> subscribers;
  double end_time = 0;  // when it died for good (DEAD), seconds since the epoch; else 0
};

struct PgRecord {
  proto::PlacementGroupMsg spec;
  enum State { kPending, kCreated, kRemoved } state = kPending;
  std::vector<std::string> bundle_nodes;  // hex node id per bundle ("" when unplaced)
  std::string reason;
};

struct JobRecord {
  proto::JobMsg info;  // job_id binary; reply_to, request_id and binary fields unset
  bool running = false;
  double start_time = 0;
  std::string end_cause;
  double end_time = 0;  // when it ended, seconds since the epoch; 0 while running
};

// A task lease: pending (node_id "") or granted on a node (and a bundle of its group).
struct LeaseRecord {
  proto::LeaseRequestMsg request;
  std::string node_id;
  int bundle = -1;
};

const char* ActorStateName(proto::ActorState s);

std::string NodeRecordJson(const NodeRecord& r);
std::string ActorRecordJson(const ActorRecord& r);
std::string PgRecordJson(const PgRecord& r);
std::string JobRecordJson(const JobRecord& r);
std::string LeaseRecordJson(const LeaseRecord& r);

Result<NodeRecord> ParseNodeRecord(std::string_view json);
Result<ActorRecord> ParseActorRecord(std::string_view json);
Result<PgRecord> ParsePgRecord(std::string_view json);
Result<JobRecord> ParseJobRecord(std::string_view json);
Result<LeaseRecord> ParseLeaseRecord(std::string_view json);

// Binary blobs (msgpack specs) are stored as lowercase hex. Decoding is strict: odd
// lengths and non-hex characters are InvalidArgument.
std::string ToHex(std::string_view bytes);
Result<std::string> FromHex(std::string_view hex);

}  // namespace orrery::scheduler::records
