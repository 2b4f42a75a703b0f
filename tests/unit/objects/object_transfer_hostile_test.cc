// The object data channel against hostile peers (objects/internal/object_transfer.h): a fake server
// (a raw socket of this test) whose replies do not match the requests, or that closes or stalls
// mid-chunk, makes PullObject fail with the right error within its bounds; clients that send
// garbage, ask for too much, never speak or open too many connections leave the server serving
// a good client. Every wait has a deadline; "within its bounds" is a hang check, not a timing.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <vector>

#include "tests/unit/objects/object_transfer_fixture.h"

namespace orrery::objects::testing {
namespace {

using transfer::Bounds;

constexpr uint64_t kSize = 200000;

// Reads the client's first request on a connection whose handshake the fake server did.
transfer::Request ReadRequest(int fd) {
  char buf[transfer::Request::kSize];
  transfer::Request req;
  EXPECT_TRUE(transfer::RecvExact(fd, buf, sizeof(buf), Bounds{}).ok());
  EXPECT_TRUE(transfer::Decode(buf, &req).ok());
  return req;
}

void SendReply(int fd, const transfer::Reply& rep, size_t payload_bytes) {
  char buf[transfer::Reply::kSize];
  transfer::Encode(rep, buf);
  std::string payload(payload_bytes, 'x');
  (void)transfer::SendBytes(fd, buf, sizeof(buf), Bounds{});
  (void)transfer::SendBytes(fd, payload.data(), payload.size(), Bounds{});
}

// A fake server that does the handshake, reads one request and answers it with `edit` applied
// to a correct reply, then sends `payload` bytes (the requested length when negative) and
// waits for the client to go (or closes at once).
FakeServer::Behaviour Answer(std::function<void(transfer::Reply&)> edit, long payload = -1,
                             bool close_at_once = false) {
  return [edit, payload, close_at_once](int fd) {
    if (!transfer::ServerHandshake(fd, TransferKey{}, Bounds{}).ok()) return;
    transfer::Request req = ReadRequest(fd);
    transfer::Reply rep;
    rep.id = req.id;
    rep.offset = req.offset;
    rep.length = req.length;
    rep.object_size = kSize;
    edit(rep);
    SendReply(fd, rep, payload < 0 ? req.length : size_t(payload));
    if (!close_at_once) WaitClosed(fd, 20000);
  };
}

Status PullFrom(const FakeServer& fake, const TransferKey& key = {}) {
  std::string got;
  PullOptions o = TestOptions(kSize, 1);  // one request: the one the fake server answers
  o.stall_timeout_ms = 300;
  return PullInto(fake.address(), ObjectId::Random(), kSize, &got, o, key);
}

TEST(ObjectTransferHostileTest, RepliesThatDoNotMatchTheRequestAreRejected) {
  std::vector<std::pair<const char*, std::function<void(transfer::Reply&)>>> edits = {
      {"offset", [](transfer::Reply& r) { r.offset += 1; }},
      {"length", [](transfer::Reply& r) { r.length -= 1; }},
      {"longer", [](transfer::Reply& r) { r.length = uint64_t(1) << 40; }},
      {"id", [](transfer::Reply& r) { r.id = ObjectId::Random(); }},
      {"object size", [](transfer::Reply& r) { r.object_size += 1; }},
  };
  for (auto& [what, edit] : edits) {
    FakeServer fake(Answer(edit));
    Status s = PullFrom(fake);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what << ": " << s.ToString();
  }
}

TEST(ObjectTransferHostileTest, BadMagicVersionOrStatusIsRejected) {
  for (int field : {0, 4, 6}) {  // the magic, the version, the status
    FakeServer fake([field](int fd) {
      if (!transfer::ServerHandshake(fd, TransferKey{}, Bounds{}).ok()) return;
      transfer::Request req = ReadRequest(fd);
      transfer::Reply rep{transfer::ReplyStatus::kOk, req.id, req.offset, req.length, kSize};
      char buf[transfer::Reply::kSize];
      transfer::Encode(rep, buf);
      buf[field] ^= 0x5a;
      (void)transfer::SendBytes(fd, buf, sizeof(buf), Bounds{});
      WaitClosed(fd, 20000);
    });
    Status s = PullFrom(fake);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << field << ": " << s.ToString();
  }
  // A hello that is not one.
  FakeServer garbage([](int fd) {
    std::string junk = RandomBytes(transfer::ServerHello::kSize, 5);
    (void)transfer::SendBytes(fd, junk.data(), junk.size(), Bounds{});
    WaitClosed(fd, 20000);
  });
  Status s = PullFrom(garbage);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

TEST(ObjectTransferHostileTest, CloseMidChunkIsUnavailable) {
  FakeServer fake(Answer([](transfer::Reply&) {}, kSize / 2, /*close_at_once=*/true));
  Status s = PullFrom(fake);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
}

TEST(ObjectTransferHostileTest, StallsFailWithinTheStallTimeout) {
  FakeServer mid_chunk(Answer([](transfer::Reply&) {}, kSize / 2));
  FakeServer silent([](int fd) { WaitClosed(fd, 20000); });  // never says hello
  FakeServer no_reply([](int fd) {                           // reads the request, says nothing
    if (!transfer::ServerHandshake(fd, TransferKey{}, Bounds{}).ok()) return;
    ReadRequest(fd);
    WaitClosed(fd, 20000);
  });
  for (const FakeServer* fake : {&mid_chunk, &silent, &no_reply}) {
    double t0 = Seconds();
    Status s = PullFrom(*fake);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    EXPECT_LT(Seconds() - t0, 10.0) << "the 300 ms stall timeout did not bound the wait";
  }
}

TEST(ObjectTransferHostileTest, CancelStopsAStalledPull) {
  std::promise<void> asked;
  FakeServer fake([&asked](int fd) {
    if (!transfer::ServerHandshake(fd, TransferKey{}, Bounds{}).ok()) return;
    ReadRequest(fd);
    asked.set_value();
    WaitClosed(fd, 20000);
  });
  std::atomic<bool> cancel{false};
  PullOptions o = TestOptions(kSize, 1);
  o.stall_timeout_ms = 60000;
  o.cancel = &cancel;
  std::string got;
  auto pull = std::async(std::launch::async, [&] {
    return PullInto(fake.address(), ObjectId::Random(), kSize, &got, o, {});
  });
  ASSERT_EQ(asked.get_future().wait_for(std::chrono::seconds(20)), std::future_status::ready);
  cancel.store(true);
  ASSERT_EQ(pull.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_EQ(pull.get().code(), StatusCode::kCancelled);
}

TEST(ObjectTransferHostileTest, AServerThatCannotProveTheKeyIsRefused) {
  FakeServer impostor([](int fd) {  // asks for the key, then accepts without proving it has it
    transfer::ServerHello hello;
    hello.flags = transfer::kFlagAuth;
    hello.nonce = transfer::RandomNonce();
    char buf[transfer::ClientHello::kSize];
    transfer::Encode(hello, buf);
    (void)transfer::SendBytes(fd, buf, transfer::ServerHello::kSize, Bounds{});
    if (!transfer::RecvExact(fd, buf, transfer::ClientHello::kSize, Bounds{}).ok()) return;
    transfer::ServerAccept accept;  // kOk, a zero MAC
    transfer::Encode(accept, buf);
    (void)transfer::SendBytes(fd, buf, transfer::ServerAccept::kSize, Bounds{});
    WaitClosed(fd, 20000);
  });
  Status s = PullFrom(impostor, Key('k'));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
}

// A server with short handshake and idle timeouts and a key, holding one object.
class HostileClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = transfer::GetServerLimits();
    transfer::ServerLimits limits;
    limits.handshake_timeout_ms = 300;
    limits.idle_timeout_ms = 300;
    transfer::SetServerLimits(limits);
    bytes_ = RandomBytes(kSize, 9);
    id_ = objects_.Add(bytes_);
    server_ = std::make_unique<ObjectServer>(objects_.Lookup(), Key('k'));
    ASSERT_TRUE(server_->Start("127.0.0.1").ok());
  }
  void TearDown() override {
    server_.reset();
    transfer::SetServerLimits(saved_);
  }

  // A good client is served (retrying while the server is busy, for at most 20 s).
  void ExpectServesAGoodClient() {
    std::string got;
    Status s;
    for (double deadline = Seconds() + 20; Seconds() < deadline;) {
      s = PullInto(server_->address(), id_, kSize, &got, TestOptions(), Key('k'));
      if (s.code() != StatusCode::kUnavailable) break;
    }
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(got == bytes_);
  }

  // A raw connection that passed the handshake.
  int Authenticated() {
    int fd = RawConnect(server_->address());
    EXPECT_GE(fd, 0);
    EXPECT_TRUE(transfer::ClientHandshake(fd, Key('k'), Bounds{}).ok());
    return fd;
  }

  // Sends a request and returns the reply header's status; the server must then close.
  transfer::ReplyStatus AskAndExpectClose(uint64_t offset, uint64_t length) {
    int fd = Authenticated();
    char buf[transfer::Reply::kSize];
    transfer::Encode(transfer::Request{id_, offset, length}, buf);
    EXPECT_TRUE(transfer::SendBytes(fd, buf, transfer::Request::kSize, Bounds{}).ok());
    transfer::Reply rep;
    EXPECT_TRUE(transfer::RecvExact(fd, buf, sizeof(buf), Bounds{}).ok());
    EXPECT_TRUE(transfer::Decode(buf, &rep).ok());
    EXPECT_TRUE(WaitClosed(fd, 20000));
    close(fd);
    return rep.status;
  }

  transfer::ServerLimits saved_;
  MemoryObjects objects_;
  std::string bytes_;
  ObjectId id_;
  std::unique_ptr<ObjectServer> server_;
};

TEST_F(HostileClientTest, GarbageIsDroppedInTheHandshakeAndAfterIt) {
  int fd = RawConnect(server_->address());
  ASSERT_GE(fd, 0);
  std::string junk = RandomBytes(1000, 11);
  (void)transfer::SendBytes(fd, junk.data(), junk.size(), Bounds{});
  EXPECT_TRUE(WaitClosed(fd, 20000));
  close(fd);
  fd = Authenticated();
  (void)transfer::SendBytes(fd, junk.data(), junk.size(), Bounds{});
  EXPECT_TRUE(WaitClosed(fd, 20000));
  close(fd);
  ExpectServesAGoodClient();
}

TEST_F(HostileClientTest, OversizedAndOutOfRangeRequestsAreRefused) {
  using transfer::ReplyStatus;
  EXPECT_EQ(AskAndExpectClose(0, transfer::kMaxRequestBytes + 1), ReplyStatus::kBadRequest);
  EXPECT_EQ(AskAndExpectClose(0, kSize + 1), ReplyStatus::kBadRequest);
  EXPECT_EQ(AskAndExpectClose(kSize + 1, 0), ReplyStatus::kBadRequest);
  EXPECT_EQ(AskAndExpectClose(kSize - 10, 11), ReplyStatus::kBadRequest);
  EXPECT_EQ(AskAndExpectClose(UINT64_MAX - 5, 10), ReplyStatus::kBadRequest);  // wraps around
  ExpectServesAGoodClient();
}

TEST_F(HostileClientTest, SilentAndIdleConnectionsAreClosed) {
  int silent = RawConnect(server_->address());  // never answers the hello
  ASSERT_GE(silent, 0);
  int idle = Authenticated();  // never asks
  ExpectServesAGoodClient();   // meanwhile
  EXPECT_TRUE(WaitClosed(silent, 20000));
  EXPECT_TRUE(WaitClosed(idle, 20000));
  close(silent);
  close(idle);
}

// Sends `frame` one byte per 100 ms until the server closes the connection; returns how many
// bytes went before it did (all of them when it never closed).
size_t TrickleUntilClosed(int fd, const char* frame, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (send(fd, frame + i, 1, MSG_NOSIGNAL) != 1) return i;
    if (WaitClosed(fd, 100)) return i + 1;
  }
  return WaitClosed(fd, 100) ? n : n + 1;
}

TEST_F(HostileClientTest, TricklingBytesDoesNotKeepAConnection) {
  // A valid hello, a byte at a time: the handshake must finish within its 300 ms, whatever
  // the bytes' pace.
  int fd = RawConnect(server_->address());
  ASSERT_GE(fd, 0);
  char hello[transfer::ClientHello::kSize];
  transfer::Encode(transfer::ClientHello{transfer::kFlagAuth, {}, {}}, hello);
  EXPECT_LT(TrickleUntilClosed(fd, hello, sizeof(hello)), sizeof(hello));
  close(fd);
  // A valid request, a byte at a time: the whole header within the 300 ms idle timeout.
  fd = Authenticated();
  char req[transfer::Request::kSize];
  transfer::Encode(transfer::Request{id_, 0, 10}, req);
  EXPECT_LT(TrickleUntilClosed(fd, req, sizeof(req)), sizeof(req));
  close(fd);
  ExpectServesAGoodClient();
}

TEST_F(HostileClientTest, ConnectionsBeyondTheLimitAreToldTheServerIsBusy) {
  transfer::ServerLimits limits = transfer::GetServerLimits();
  limits.handshake_timeout_ms = 60000;  // the limit's connections stay while the test runs
  transfer::SetServerLimits(limits);
  ObjectServer server(objects_.Lookup(), Key('k'));
  ASSERT_TRUE(server.Start("127.0.0.1").ok());
  std::vector<int> fds;
  for (int i = 0; i < transfer::kMaxConnections; ++i) {
    fds.push_back(RawConnect(server.address()));
    ASSERT_GE(fds.back(), 0);
    char buf[transfer::ServerHello::kSize];  // each was accepted and greeted
    ASSERT_TRUE(transfer::RecvExact(fds.back(), buf, sizeof(buf), Bounds{}).ok());
  }
  std::string got;
  Status s = PullInto(server.address(), id_, kSize, &got, TestOptions(), Key('k'));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("busy"), std::string::npos) << s.ToString();
  for (int fd : fds) close(fd);
  Status after;
  for (double deadline = Seconds() + 20; Seconds() < deadline;) {
    after = PullInto(server.address(), id_, kSize, &got, TestOptions(), Key('k'));
    if (after.code() != StatusCode::kUnavailable) break;
  }
  ASSERT_TRUE(after.ok()) << after.ToString();
  EXPECT_TRUE(got == bytes_);
}

}  // namespace
}  // namespace orrery::objects::testing
