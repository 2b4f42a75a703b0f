// The head's records (scheduler/src/records.h): what it writes reads back the same, and a
// hostile record (not JSON, wrong types, bad ids, not UTF-8, garbage specs) is
// InvalidArgument, never a crash or an exception.
#include "scheduler/src/records.h"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace orrery::scheduler::records {
namespace {

using nlohmann::json;

proto::ActorSpecMsg Spec() {
  proto::ActorSpecMsg spec;
  spec.actor_id = UniqueId::Random().Binary();
  spec.job_id = UniqueId::Random().Binary();
  spec.factory = "Counter::Create";
  spec.owner = "tcp://127.0.0.1:5000";
  spec.options.name = "counter";
  spec.options.namespace_ = "ns";
  spec.options.resources = {{"CPU", 1}};
  return spec;
}

ActorRecord Actor() {
  ActorRecord r;
  r.spec = Spec();
  r.state = proto::ActorState::kAlive;
  r.incarnation = 2;
  r.restarts_used = 1;
  r.node_id = UniqueId::Random().Hex();
  r.address = "tcp://127.0.0.1:6000";
  r.pid = 42;
  r.subscribers = {"tcp://127.0.0.1:5000"};
  return r;
}

// The actor record with one field replaced.
std::string ActorWith(const std::string& field, const json& value) {
  json j = json::parse(ActorRecordJson(Actor()));
  j[field] = value;
  return j.dump();
}

TEST(Utf8, ValidAndInvalid) {
  EXPECT_TRUE(IsUtf8("z\xc3\xa4hler"));
  EXPECT_TRUE(IsUtf8("\xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsUtf8("z\xe4hler"));
  EXPECT_FALSE(IsUtf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(IsUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsUtf8("\xe2\x82"));          // truncated
}

TEST(Utf8, EscapeKeepsValidTextAndEscapesTheRest) {
  EXPECT_EQ(EscapeUtf8("/home/pr\xfc"
                       "fung/a.out"),
            "/home/pr\\xfcfung/a.out");
  EXPECT_EQ(EscapeUtf8("gr\xc3\xbc\xc3\x9f"), "gr\xc3\xbc\xc3\x9f");
  EXPECT_TRUE(IsUtf8(EscapeUtf8("\xff\xfe\xc3")));
}

TEST(Utf8, CheckNamesTheOffendingString) {
  Status s = CheckUtf8("the actor's name", "z\xe4hler");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not valid UTF-8"), std::string::npos);
  EXPECT_NE(s.message().find("z\\xe4hler"), std::string::npos);
  EXPECT_FALSE(CheckUtf8("x", Labels{{"region",
                                      "s\xfc"
                                      "d"}})
                   .ok());
  EXPECT_FALSE(CheckUtf8("x", Resources{{"gr\xfc"
                                         "n",
                                         1}})
                   .ok());
  auto spec = Spec();
  spec.options.namespace_ = "n\xe4me";
  EXPECT_FALSE(CheckActorSpec(spec).ok());
  EXPECT_TRUE(CheckActorSpec(Spec()).ok());
}

TEST(Dump, NeverThrowsOnInvalidUtf8) {
  std::string out;
  EXPECT_NO_THROW(out = Dump(json{{"name", "z\xe4hler"}}));
  EXPECT_TRUE(IsUtf8(out));
  EXPECT_TRUE(json::accept(out));
}

TEST(ActorRecord, RoundTrips) {
  ActorRecord a = Actor();
  auto r = ParseActorRecord(ActorRecordJson(a));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->spec.actor_id, a.spec.actor_id);
  EXPECT_EQ(r->state, proto::ActorState::kAlive);
  EXPECT_EQ(r->incarnation, 2);
  EXPECT_EQ(r->node_id, a.node_id);
  EXPECT_EQ(r->subscribers, a.subscribers);
  EXPECT_EQ(r->spec.options.name, "counter");
}

TEST(ActorRecord, HostileRecordsAreInvalidArgument) {
  std::vector<std::string> hostile = {
      "",
      "{",
      "[]",
      "null",
      "\"text\"",
      "{\"actor_id\": 1}",
      "{\"name\": \"z\xe4hler\"}",  // not UTF-8: not JSON
      ActorWith("spec", 17),
      ActorWith("spec", "abc"),   // odd length
      ActorWith("spec", "zz"),    // not hex
      ActorWith("spec", "c0"),    // msgpack nil, not a spec
      ActorWith("spec", "9100"),  // an array of the wrong shape
      ActorWith("state", "ZOMBIE"),
      ActorWith("state", 3),
      ActorWith("incarnation", "two"),
      ActorWith("incarnation", -1),
      ActorWith("pid", json::array()),
      ActorWith("node_id", "not-an-id"),
      ActorWith("actor_id", UniqueId::Random().Hex()),  // differs from the spec's
      ActorWith("subscribers", json{{"a", 1}}),
      ActorWith("bundle", -7),
      // Numbers no int holds, or no integers at all (converting them was undefined).
      ActorWith("bundle", -1.6666e43),
      ActorWith("pid", 1e300),
      ActorWith("restarts", 4294967296LL),
      ActorWith("incarnation", 18446744073709551615ULL),
      ActorWith("pid", 2.5),
  };
  for (const auto& text : hostile) {
    auto r = ParseActorRecord(text);
    EXPECT_FALSE(r.ok()) << text;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
    }
  }
}

TEST(ActorRecord, SpecWithInvalidUtf8NameIsRefused) {
  ActorRecord a = Actor();
  a.spec.options.name = "z\xe4hler";
  // Written by something that did not validate: the spec is hex, so the JSON is valid.
  auto r = ParseActorRecord(ActorRecordJson(a));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("UTF-8"), std::string::npos);
}

TEST(NodeRecord, RoundTripsAndRefusesHostile) {
  NodeRecord n{
      NodeId(UniqueId::Random()), "tcp://127.0.0.1:7000", true, {{"CPU", 4}}, {{"zone", "a"}}};
  auto r = ParseNodeRecord(NodeRecordJson(n));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->id, n.id);
  EXPECT_EQ(r->total, n.total);
  EXPECT_EQ(r->labels, n.labels);
  json j = json::parse(NodeRecordJson(n));
  for (auto [field, value] : std::vector<std::pair<std::string, json>>{{"node_id", "xyz"},
                                                                       {"node_id", 5},
                                                                       {"total", "CPU"},
                                                                       {"total", json{{"CPU", -1}}},
                                                                       {"total", json{{"", 1}}},
                                                                       {"labels", json{{"a", 1}}},
                                                                       {"alive", "yes"}}) {
    json bad = j;
    bad[field] = value;
    EXPECT_FALSE(ParseNodeRecord(bad.dump()).ok()) << bad.dump();
  }
}

TEST(NodeRecord, ObjectStoreUsageRoundTripsAndReadsAsZeroUnlessANumberInRange) {
  NodeRecord n{NodeId(UniqueId::Random()), "tcp://127.0.0.1:7000", true, {{"CPU", 4}}, {}};
  n.object_store_capacity_bytes = 8ull << 30;
  n.object_store_used_bytes = 3ull << 30;
  n.object_store_spilled_bytes = 1ull << 40;
  n.object_store_num_objects = 12;
  auto r = ParseNodeRecord(NodeRecordJson(n));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->object_store_capacity_bytes, 8ull << 30);
  EXPECT_EQ(r->object_store_used_bytes, 3ull << 30);
  EXPECT_EQ(r->object_store_spilled_bytes, 1ull << 40);
  EXPECT_EQ(r->object_store_num_objects, 12u);

  json j = json::parse(NodeRecordJson(n));
  j.erase("object_store_num_objects");  // an older head's record
  r = ParseNodeRecord(j.dump());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->object_store_num_objects, 0u);
  for (const char* field : {"object_store_capacity_bytes", "object_store_used_bytes",
                            "object_store_spilled_bytes", "object_store_num_objects"}) {
    for (json value : {json(-1), json("12"), json(nullptr), json::array({1}), json(1e300),
                       json(std::numeric_limits<uint64_t>::max()), json(-0.5)}) {
      json bad = json::parse(NodeRecordJson(n));
      bad[field] = value;
      auto parsed = ParseNodeRecord(bad.dump());
      ASSERT_TRUE(parsed.ok()) << bad.dump();  // informational: never a reason to drop a node
      uint64_t got =
          field == std::string("object_store_capacity_bytes")  ? parsed->object_store_capacity_bytes
          : field == std::string("object_store_used_bytes")    ? parsed->object_store_used_bytes
          : field == std::string("object_store_spilled_bytes") ? parsed->object_store_spilled_bytes
                                                               : parsed->object_store_num_objects;
      EXPECT_EQ(got, 0u) << bad.dump();
    }
  }
  json frac = json::parse(NodeRecordJson(n));
  frac["object_store_num_objects"] = 7.9;
  EXPECT_EQ(ParseNodeRecord(frac.dump())->object_store_num_objects, 7u);
  // Used beyond the capacity reads as the capacity.
  json over = json::parse(NodeRecordJson(n));
  over["object_store_used_bytes"] = 9ull << 30;
  EXPECT_EQ(ParseNodeRecord(over.dump())->object_store_used_bytes, 8ull << 30);
}

TEST(PgRecord, RoundTripsAndRefusesHostile) {
  PgRecord pg;
  pg.spec.pg_id = UniqueId::Random().Binary();
  pg.spec.name = "group";
  pg.spec.bundles = {{{"CPU", 1}}, {{"CPU", 2}}};
  pg.state = PgRecord::kCreated;
  pg.bundle_nodes = {UniqueId::Random().Hex(), UniqueId::Random().Hex()};
  auto r = ParsePgRecord(PgRecordJson(pg));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->state, PgRecord::kCreated);
  EXPECT_EQ(r->bundle_nodes, pg.bundle_nodes);
  json j = json::parse(PgRecordJson(pg));
  for (auto [field, value] :
       std::vector<std::pair<std::string, json>>{{"state", "GONE"},
                                                 {"bundle_nodes", json::array({"x"})},
                                                 {"bundle_nodes", json::array()},
                                                 {"spec", "00"},
                                                 {"bundle_nodes", 3}}) {
    json bad = j;
    bad[field] = value;
    EXPECT_FALSE(ParsePgRecord(bad.dump()).ok()) << bad.dump();
  }
  PgRecord empty = pg;
  empty.spec.bundles.clear();
  empty.bundle_nodes.clear();
  EXPECT_FALSE(ParsePgRecord(PgRecordJson(empty)).ok());
}

TEST(JobRecord, RoundTripsAndRefusesHostile) {
  JobRecord job;
  job.info.job_id = UniqueId::Random().Binary();
  job.info.entrypoint = EscapeUtf8(
      "/tmp/pr\xfc"
      "fung/driver");
  job.info.pid = 7;
  job.running = true;
  auto r = ParseJobRecord(JobRecordJson(job));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->info.job_id, job.info.job_id);
  EXPECT_EQ(r->info.entrypoint, "/tmp/pr\\xfcfung/driver");
  EXPECT_TRUE(r->running);
  EXPECT_FALSE(ParseJobRecord("{\"job_id\": \"00\"}").ok());
  EXPECT_FALSE(ParseJobRecord("{\"job_id\": [1]}").ok());
  json j = json::parse(JobRecordJson(job));
  j["pid"] = "seven";
  EXPECT_FALSE(ParseJobRecord(j.dump()).ok());
}

// The executable's SHA-256 survives a restart; a record whose hash is not 64 lowercase hex
// digits (it could name a path: "../../bin/sh") is refused.
TEST(JobRecord, KeepsTheExecutableHashAndRefusesMalformedOnes) {
  JobRecord job;
  job.info.job_id = UniqueId::Random().Binary();
  job.info.binary_hash = std::string(64, 'a');
  job.info.arch = "x86_64";
  auto r = ParseJobRecord(JobRecordJson(job));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->info.binary_hash, job.info.binary_hash);
  EXPECT_EQ(r->info.arch, "x86_64");
  for (const std::string& bad :
       {std::string(64, 'A'), std::string(32, 'a'), "../../bin/sh" + std::string(52, 'a')}) {
    json j = json::parse(JobRecordJson(job));
    j["executable_sha256"] = bad;
    EXPECT_FALSE(ParseJobRecord(j.dump()).ok()) << bad;
  }
}

TEST(LeaseRecord, RoundTripsAndRefusesHostile) {
  LeaseRecord l;
  l.request.lease_id = UniqueId::Random().Binary();
  l.request.job_id = UniqueId::Random().Binary();
  l.request.resources = {{"CPU", 1}};
  l.node_id = UniqueId::Random().Hex();
  auto r = ParseLeaseRecord(LeaseRecordJson(l));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->request.lease_id, l.request.lease_id);
  EXPECT_EQ(r->node_id, l.node_id);
  json j = json::parse(LeaseRecordJson(l));
  for (auto [field, value] : std::vector<std::pair<std::string, json>>{{"request", "zz"},
                                                                       {"request", 1},
                                                                       {"node_id", "node"},
                                                                       {"bundle", -2},
                                                                       {"bundle", "0"}}) {
    json bad = j;
    bad[field] = value;
    EXPECT_FALSE(ParseLeaseRecord(bad.dump()).ok()) << bad.dump();
  }
  LeaseRecord no_id = l;
  no_id.request.lease_id = "short";
  EXPECT_FALSE(ParseLeaseRecord(LeaseRecordJson(no_id)).ok());
}

TEST(Hex, StrictDecoding) {
  EXPECT_EQ(FromHex("00ff").value(), std::string("\x00\xff", 2));
  EXPECT_FALSE(FromHex("abc").ok());
  EXPECT_FALSE(FromHex("0g").ok());
  EXPECT_EQ(ToHex(std::string("\x01\xab", 2)), "01ab");
}

}  // namespace
}  // namespace orrery::scheduler::records
