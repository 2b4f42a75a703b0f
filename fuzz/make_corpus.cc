// Writes the fuzzers' seed corpus: `fuzz_make_corpus <dir>` fills <dir>/<target>/ with one
// small file per seed (the repository's copy is fuzz/corpus/, regenerated with this program
// when a message or a registered signature changes). Seeds are valid inputs and a few
// near-misses, so that the fuzzer starts from the shapes real peers send.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/internal/protocol.h"
#include "fuzz/registry_args_fuzzer.h"
#include "scheduler/src/records.h"
#include "tests/fakes/folder_package.h"

namespace {

using namespace orrery::proto;  // NOLINT: the message bodies

std::string root;

void Write(const std::string& target, const std::string& name, const std::string& bytes) {
  std::string dir = root + "/" + target;
  mkdir(root.c_str(), 0755);
  mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
}

template <typename T>
std::string Packed(const T& v) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, v);
  return std::string(buf.data(), buf.size());
}

const std::string kId(16, '\x11');

void MessageDecoder() {
  const char* t = "message_decoder";
  Write(t, "error", EncodeFrame(MsgType::kError, ErrorMsg{7, "malformed message body"}));
  Write(t, "ack",
        EncodeFrame(MsgType::kAck,
                    AckMsg{7, false, orrery::proto::ErrorKind::kActorDiedError, "gone"}));
  CallMsg call;
  call.request_id = 1;
  call.object_id = kId;
  call.reply_to = "tcp://127.0.0.1:5000";
  call.actor_id = kId;
  call.seq = 3;
  call.function = "Counter::Inc";
  Write(t, "call", EncodeFrame(MsgType::kCall, call));
  ReplyMsg reply;
  reply.object_id = kId;
  reply.ok = false;
  reply.error_kind = orrery::proto::ErrorKind::kRemoteError;
  reply.message = "boom";
  Write(t, "call_reply", EncodeFrame(MsgType::kCallReply, reply));
  reply.ok = true;
  reply.contained = {ContainedRefMsg{kId, "tcp://127.0.0.1:5000"}};
  Write(t, "call_reply_contained", EncodeFrame(MsgType::kCallReply, reply));
  Write(t, "borrow", EncodeFrame(MsgType::kBorrow, BorrowMsg{kId, "tcp://127.0.0.1:5001", 1}));
  Write(t, "cancel", EncodeFrame(MsgType::kCancel, CancelMsg{kId, true}));
  StreamItemMsg item;
  item.call_id = kId;
  item.index = 3;
  item.object_id = std::string(16, '\x22');
  item.ack_to = "tcp://127.0.0.1:5002";
  item.contained = {ContainedRefMsg{kId, "tcp://127.0.0.1:5000"}};
  Write(t, "stream_item", EncodeFrame(MsgType::kStreamItem, item));
  Write(t, "stream_ack", EncodeFrame(MsgType::kStreamAck, StreamAckMsg{kId, 8, false}));
  Write(t, "get_object", EncodeFrame(MsgType::kGetObject, GetObjectMsg{}));
  ObjectStoreMsg store;
  store.request_id = 9;
  store.reply_to = "tcp://127.0.0.1:5000";
  store.object_id = std::string(16, '\x07');
  store.size = 1 << 20;
  store.source = ObjectLocationMsg{"tcp://127.0.0.1:5001", "127.0.0.1:5002", 1 << 20};
  Write(t, "object_open", EncodeFrame(MsgType::kObjectOpen, store));
  Write(t, "object_store_reply", EncodeFrame(MsgType::kObjectStoreReply, ObjectStoreReplyMsg{}));
  Write(t, "object_free", EncodeFrame(MsgType::kObjectFree, ObjectFreeMsg{{store.object_id}}));
  Write(t, "list_objects_reply", EncodeFrame(MsgType::kListObjectsReply, ListObjectsReplyMsg{}));
  Write(t, "create_actor", EncodeFrame(MsgType::kCreateActor, CreateActorMsg{}));
  Write(t, "actor_update", EncodeFrame(MsgType::kActorUpdate, ActorUpdateMsg{}));
  Write(t, "subscribe_actor", EncodeFrame(MsgType::kSubscribeActor, SubscribeActorMsg{}));
  Write(t, "named_actor", EncodeFrame(MsgType::kGetNamedActor, NamedActorMsg{}));
  Write(t, "kill_actor", EncodeFrame(MsgType::kKillActor, KillActorMsg{}));
  Write(t, "request_lease", EncodeFrame(MsgType::kRequestLease, LeaseRequestMsg{}));
  Write(t, "lease_reply", EncodeFrame(MsgType::kLeaseReply, LeaseReplyMsg{}));
  Write(t, "return_lease", EncodeFrame(MsgType::kReturnLease, ReturnLeaseMsg{}));
  Write(t, "placement_group", EncodeFrame(MsgType::kCreatePlacementGroup, PlacementGroupMsg{}));
  Write(t, "placement_group_reply",
        EncodeFrame(MsgType::kPlacementGroupReply, PlacementGroupReplyMsg{}));
  Write(t, "cluster_info", EncodeFrame(MsgType::kClusterInfoReply, ClusterInfoMsg{}));
  Write(t, "register_node", EncodeFrame(MsgType::kRegisterNode, RegisterNodeMsg{}));
  Write(t, "start_actor", EncodeFrame(MsgType::kStartActor, StartActorMsg{}));
  Write(t, "grant_lease", EncodeFrame(MsgType::kGrantLease, GrantLeaseMsg{}));
  Write(t, "kill_worker", EncodeFrame(MsgType::kKillWorker, KillWorkerMsg{}));
  Write(t, "worker_event", EncodeFrame(MsgType::kWorkerEvent, WorkerEventMsg{}));
  Write(t, "release_lease", EncodeFrame(MsgType::kReleaseLease, ReleaseLeaseMsg{}));
  Write(t, "worker_register", EncodeFrame(MsgType::kWorkerRegister, WorkerRegisterMsg{}));
  Write(t, "assign", EncodeFrame(MsgType::kAssign, AssignMsg{}));
  Write(t, "assign_reply", EncodeFrame(MsgType::kAssignReply, AssignReplyMsg{}));
  Write(t, "register_job", EncodeFrame(MsgType::kRegisterJob, JobMsg{}));
  Write(t, "put_record", EncodeFrame(MsgType::kPutRecord, RecordMsg{}));
  Write(t, "fetch_binary", EncodeFrame(MsgType::kFetchBinary, BinaryMsg{}));
  Write(t, "ping", EncodeFrame(MsgType::kPing, PingMsg{}));
  // Near-misses: wrong magic, a future version, an unknown type, a body of the wrong shape.
  std::string ping = EncodeFrame(MsgType::kPing, PingMsg{});
  Write(t, "bad_magic", "XR" + ping.substr(2));
  std::string v2 = ping;
  v2[2] = char(kProtocolVersion + 1);
  Write(t, "bad_version", v2);
  std::string unknown = ping;
  unknown[3] = char(200);
  Write(t, "unknown_type", unknown);
  Write(t, "header_only", ping.substr(0, kHeaderSize));
  Write(t, "body_is_map",
        ping.substr(0, kHeaderSize) + Packed(std::map<std::string, int>{{"a", 1}}));
}

void RegistryArgs() {
  const char* t = "registry_args";
  auto seed = [&](const std::string& name, int entry, const std::string& args) {
    Write(t, name, std::string(1, char(entry)) + args);
  };
  using fuzz::Point;
  seed("add", 0, Packed(std::make_tuple(1, 2)));
  seed("widen", 1, Packed(std::make_tuple(-1, 65535, int64_t(-5), uint64_t(1) << 63)));
  seed("not", 2, Packed(std::make_tuple(true)));
  seed("mean", 3, Packed(std::make_tuple(std::vector<double>{1.5, 2.5, -3})));
  seed("concat", 4, Packed(std::make_tuple(std::string("a"), std::vector<std::string>{"b", "c"})));
  seed("count_nested", 5,
       Packed(std::make_tuple(std::map<std::string, std::vector<int>>{{"x", {1, 2}}, {"y", {}}})));
  seed("mirror", 6, Packed(std::make_tuple(Point{1, 2.5, "p"})));
  seed("swap", 7, Packed(std::make_tuple(std::make_tuple(std::string("s"), 4))));
  seed("grid", 8,
       Packed(std::make_tuple(std::vector<std::vector<Point>>{{Point{}, Point{1, 1, "q"}}})));
  seed("sink", 9, Packed(std::make_tuple(std::string("s"), 1.5f, std::vector<uint8_t>{1, 2, 3})));
  seed("create", 10, Packed(std::make_tuple(std::string("alice"), int64_t(100))));
  seed("deposit", 11, Packed(std::make_tuple(int64_t(5))));
  seed("rename", 12,
       Packed(std::make_tuple(std::string("bob"), std::map<std::string, std::string>{{"k", "v"}})));
  seed("points", 13, Packed(std::make_tuple(std::vector<Point>{Point{}, Point{}})));
  // Near-misses: too few arguments, a wrong type, not an array.
  seed("add_one_arg", 0, Packed(std::make_tuple(1)));
  seed("add_strings", 0, Packed(std::make_tuple(std::string("1"), std::string("2"))));
  seed("mean_not_array", 3, Packed(7));
}

void DashboardRequest() {
  const char* t = "dashboard_request";
  auto get = [](const std::string& path, const std::string& extra = "") {
    return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:8265\r\nUser-Agent: seed\r\n" + extra +
           "\r\n";
  };
  Write(t, "index", get("/"));
  Write(t, "api_cluster", get("/api/cluster"));
  Write(t, "api_nodes_query", get("/api/nodes?limit=10&sort=name"));
  Write(t, "api_run", get("/api/runs/0123456789abcdef0123456789abcdef"));
  Write(t, "page_run", get("/runs/0123456789abcdef0123456789abcdef"));
  Write(t, "static_js",
        get("/static/app.js", "Accept-Encoding: gzip, br\r\nRange: bytes=0-10\r\n"));
  Write(t, "percent_path", get("/api/%61ctors?x=%zz"));
  Write(t, "head", "HEAD /api/jobs HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n");
  Write(t, "post_body",
        "POST /api/nodes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
        "7\r\n\r\n{\"a\":1}");
  Write(t, "chunked",
        "POST /api/actors HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
        "chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n");
  Write(t, "multipart",
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
        "Content-Length: 44\r\n\r\n--b\r\nContent-Disposition: form-data; name=a\r\n\r\n");
  Write(t, "garbage", "GARBAGE\r\n\r\n");
  Write(t, "http10", "GET /nodes HTTP/1.0\r\n\r\n");
  // Credentials (the fuzzer's dashboard requires the token below).
  const std::string token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  Write(t, "bearer", get("/api/cluster", "Authorization: Bearer " + token + "\r\n"));
  Write(t, "bearer_wrong", get("/api/nodes", "Authorization: bearer x y\r\n"));
  Write(t, "cookie", get("/nodes", "Cookie: a=1; orrery_dashboard_session=\"abc\"; b\r\n"));
  Write(t, "ticket", get("/login?ticket=" + token + "&ticket=x"));
  std::string form = "x=%zz&token=" + token.substr(0, 10) + "%2" + token.substr(12) + "+";
  Write(t, "login_form",
        "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        "Content-Length: " +
            std::to_string(form.size()) + "\r\n\r\n" + form);
  Write(t, "logout",
        "POST /logout HTTP/1.1\r\nHost: x\r\nCookie: orrery_dashboard_session=1\r\n\r\n");
}

void RedisRecord() {
  namespace records = orrery::scheduler::records;
  const char* t = "redis_record";
  auto seed = [&](const std::string& name, int table, const std::string& json) {
    Write(t, name, std::string(1, char(table)) + json);
  };
  orrery::NodeId node(orrery::UniqueId::FromBinary(kId));
  records::NodeRecord n{
      node, "tcp://127.0.0.1:6380", true, {{"CPU", 4}}, {{"zone", "a"}}, 1 << 30, 4ll << 30, 0.95};
  seed("node", 0, records::NodeRecordJson(n));
  records::ActorRecord a;
  a.spec.actor_id = kId;
  a.spec.job_id = kId;
  a.spec.factory = "Counter::Create";
  a.spec.options.name = "counter";
  a.spec.options.resources = {{"CPU", 1}};
  a.state = ActorState::kAlive;
  a.node_id = node.Hex();
  a.address = "tcp://127.0.0.1:40000";
  a.pid = 1234;
  a.subscribers = {"tcp://127.0.0.1:40001"};
  seed("actor", 1, records::ActorRecordJson(a));
  records::PgRecord pg;
  pg.spec.pg_id = kId;
  pg.spec.name = "slice";
  pg.spec.bundles = {{{"TPU", 4}}, {{"TPU", 4}}};
  pg.state = records::PgRecord::kCreated;
  pg.bundle_nodes = {node.Hex(), node.Hex()};
  seed("placement_group", 2, records::PgRecordJson(pg));
  records::JobRecord j;
  j.info.job_id = kId;
  j.info.entrypoint = "/usr/bin/driver";
  j.running = true;
  seed("job", 3, records::JobRecordJson(j));
  records::LeaseRecord l;
  l.request.lease_id = kId;
  l.request.job_id = kId;
  l.request.resources = {{"CPU", 1}};
  l.node_id = node.Hex();
  seed("lease", 4, records::LeaseRecordJson(l));
  // Near-misses: not JSON, a JSON array, a wrong type, a spec that is not hex.
  seed("not_json", 1, "{\"actor_id\": ");
  seed("array", 0, "[1, 2, 3]");
  seed("wrong_type", 0, "{\"node_id\": 7, \"total\": {\"CPU\": \"four\"}}");
  seed("spec_not_hex", 1, "{\"actor_id\": \"11\", \"spec\": \"zz\"}");
}

// Working_dir packages (core/internal/folder_pack.h): one packed from a real folder, and
// near-misses a node must refuse.
void FolderPack() {
  using orrery::testing::FolderPackage;
  Write("folder_pack", "project",
        FolderPackage({{"bin", 0, ""},
                       {"bin/run.sh", 2, "#!/bin/sh\necho hi\n"},
                       {"data", 0, ""},
                       {"data/values.bin", 1, std::string("\0\1\2", 3)},
                       {"greeting.txt", 1, "hello"}}));
  Write("folder_pack", "empty", FolderPackage({}));
  Write("folder_pack", "parent", FolderPackage({{"../x", 1, "out"}}));
  Write("folder_pack", "absolute", FolderPackage({{"/tmp/x", 1, "out"}}));
  Write("folder_pack", "no_folder", FolderPackage({{"sub/x", 1, "a"}}));
  Write("folder_pack", "file_as_folder", FolderPackage({{"f", 1, "a"}, {"f/x", 1, "b"}}));
  Write("folder_pack", "repeated", FolderPackage({{"x", 1, "a"}, {"x", 1, "b"}}));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " <corpus dir, e.g. fuzz/corpus>\n";
    return 2;
  }
  root = argv[1];
  MessageDecoder();
  RegistryArgs();
  DashboardRequest();
  RedisRecord();
  FolderPack();
  return 0;
}
