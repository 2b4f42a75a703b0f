// The object data channel between well-behaved peers (objects/internal/object_transfer.h): bytes
// arrive intact whatever the size, chunking and parallelism; a missing object, a wrong key and
// a cancel fail cleanly; Stop returns with transfers in flight. Peers on loopback, threads of
// this test; hostile peers are in object_transfer_hostile_test.cc.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "core/internal/security.h"
#include "tests/unit/objects/object_transfer_fixture.h"

namespace orrery::objects::testing {
namespace {

TEST(ObjectTransferTest, RoundTripsEverySizeAroundTheChunk) {
  const uint64_t chunk = 64 << 10;
  MemoryObjects objects;
  ObjectServer server(objects.Lookup(), Key('k'));
  ASSERT_TRUE(server.Start("127.0.0.1").ok());
  std::vector<uint64_t> sizes = {0, 1, chunk - 1, chunk, chunk + 1, 20 << 20};
  for (uint64_t size : sizes) {
    std::string bytes = RandomBytes(size, uint32_t(size));
    ObjectId id = objects.Add(bytes);
    for (int parallel : {1, 2, 3}) {
      std::string got;
      Status s = PullInto(server.address(), id, size, &got, TestOptions(chunk, parallel), Key('k'));
      ASSERT_TRUE(s.ok()) << "size " << size << " parallel " << parallel << ": " << s.ToString();
      EXPECT_TRUE(got == bytes) << "size " << size << " parallel " << parallel;
    }
  }
}

TEST(ObjectTransferTest, DefaultOptionsWithoutKeys) {
  MemoryObjects objects;
  ObjectServer server(objects.Lookup(), TransferKey{});
  ASSERT_TRUE(server.Start("127.0.0.1", "localhost").ok());
  EXPECT_EQ(server.address().rfind("localhost:", 0), 0u) << server.address();
  std::string bytes = RandomBytes((20 << 20) + 12345, 7);
  ObjectId id = objects.Add(bytes);
  std::string got;
  ASSERT_TRUE(PullInto(server.address(), id, bytes.size(), &got, PullOptions{}, {}).ok());
  EXPECT_TRUE(got == bytes);
}

TEST(ObjectTransferTest, Ipv6LoopbackAddressesAreBracketed) {
  MemoryObjects objects;
  ObjectServer server(objects.Lookup(), Key('k'));
  if (!server.Start("::1").ok()) GTEST_SKIP() << "no IPv6 loopback here";
  EXPECT_EQ(server.address().rfind("[::1]:", 0), 0u) << server.address();
  std::string bytes = RandomBytes(100000, 4);
  ObjectId id = objects.Add(bytes);
  std::string got;
  Status s = PullInto(server.address(), id, bytes.size(), &got, TestOptions(), Key('k'));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(got == bytes);
}

TEST(ObjectTransferTest, NotFoundAndSizeMismatch) {
  MemoryObjects objects;
  ObjectServer server(objects.Lookup(), Key('k'));
  ASSERT_TRUE(server.Start("127.0.0.1").ok());
  std::string got;
  for (uint64_t size : {0, 1000}) {
    Status s = PullInto(server.address(), ObjectId::Random(), size, &got, TestOptions(), Key('k'));
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  }
  std::string bytes = RandomBytes(1000, 1);
  ObjectId id = objects.Add(bytes);
  // The puller's size must be the object's: a shorter one would silently truncate.
  for (uint64_t size : {999, 1001, 0}) {
    Status s = PullInto(server.address(), id, size, &got, TestOptions(), Key('k'));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << size << ": " << s.ToString();
  }
  ASSERT_TRUE(PullInto(server.address(), id, 1000, &got, TestOptions(), Key('k')).ok());
  EXPECT_TRUE(got == bytes);
}

TEST(ObjectTransferTest, ALookupThatFailsOrThrowsIsAnInternalError) {
  std::atomic<int> calls{0};
  ObjectServer server(
      [&](const ObjectId&) -> Result<ObjectBytes> {
        int n = calls++;
        if (n == 0) return Status::Unavailable("spilled file unreadable");
        if (n == 1) return ObjectBytes{nullptr, 10, nullptr};
        throw std::runtime_error("store bug");
      },
      {});
  ASSERT_TRUE(server.Start("127.0.0.1").ok());
  std::string got;
  for (int i = 0; i < 3; ++i) {
    Status s = PullInto(server.address(), ObjectId::Random(), 10, &got, TestOptions(), {});
    EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
  }
}

TEST(ObjectTransferTest, WrongKeyOnEitherSideFailsAndTheServerKeepsServing) {
  MemoryObjects objects;
  std::string bytes = RandomBytes(300000, 2);
  ObjectId id = objects.Add(bytes);
  ObjectServer keyed(objects.Lookup(), Key('a'));
  ObjectServer open(objects.Lookup(), TransferKey{});
  ASSERT_TRUE(keyed.Start("127.0.0.1").ok());
  ASSERT_TRUE(open.Start("127.0.0.1").ok());
  std::string got;
  struct Case {
    const ObjectServer* server;
    TransferKey key;
  };
  for (const Case& c : {Case{&keyed, Key('b')}, Case{&keyed, TransferKey{}},
                        Case{&keyed, TransferKey{true, "short"}}, Case{&open, Key('a')}}) {
    Status s = PullInto(c.server->address(), id, bytes.size(), &got, TestOptions(), c.key);
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  }
  ASSERT_TRUE(PullInto(keyed.address(), id, bytes.size(), &got, TestOptions(), Key('a')).ok());
  EXPECT_TRUE(got == bytes);
  ASSERT_TRUE(PullInto(open.address(), id, bytes.size(), &got, TestOptions(), {}).ok());
  EXPECT_TRUE(got == bytes);
}

TEST(ObjectTransferTest, UnreachableAndMalformedAddresses) {
  // A port nobody listens on: bound, then closed.
  std::string dead;
  {
    MemoryObjects objects;
    ObjectServer server(objects.Lookup(), {});
    ASSERT_TRUE(server.Start("127.0.0.1").ok());
    dead = server.address();
  }
  std::string got;
  Status s = PullInto(dead, ObjectId::Random(), 10, &got, TestOptions(), {});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  for (std::string bad : {"nohost", "127.0.0.1:", ":80", "127.0.0.1:99999", "::1:80", "[::1:80"}) {
    s = PullInto(bad, ObjectId::Random(), 10, &got, TestOptions(), {});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad << ": " << s.ToString();
  }
  PullOptions zero_chunk = TestOptions(0);
  s = PullInto(dead, ObjectId::Random(), 10, &got, zero_chunk, {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(ObjectTransferTest, CancelBeforeStart) {
  std::atomic<bool> cancel{true};
  PullOptions o = TestOptions();
  o.cancel = &cancel;
  std::string got;
  Status s = PullInto("127.0.0.1:1", ObjectId::Random(), 10, &got, o, {});
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
}

TEST(ObjectTransferTest, StopReturnsWithTransfersInFlight) {
  MemoryObjects objects;
  std::string bytes = RandomBytes(64 << 20, 3);
  ObjectId id = objects.Add(bytes);
  auto server = std::make_unique<ObjectServer>(objects.Lookup(), Key('k'));
  ASSERT_TRUE(server->Start("127.0.0.1").ok());
  // A client that asks for 64 MiB and never reads: the server's thread waits to send.
  int fd = RawConnect(server->address());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(transfer::ClientHandshake(fd, Key('k'), transfer::Bounds{}).ok());
  transfer::Request req{id, 0, bytes.size()};
  char buf[transfer::Request::kSize];
  transfer::Encode(req, buf);
  ASSERT_TRUE(transfer::SendBytes(fd, buf, sizeof(buf), transfer::Bounds{}).ok());
  ASSERT_TRUE(objects.WaitLookups(1));
  // And a real pull in small chunks, under way.
  std::string got(bytes.size(), '\0');
  Status pulled;
  std::thread puller([&] {
    PullOptions o = TestOptions(16 << 10, 2);
    o.stall_timeout_ms = 20000;
    pulled = PullObject(server->address(), id, bytes.size(), got.data(), o, Key('k'));
  });
  ASSERT_TRUE(objects.WaitLookups(3));
  server->Stop();
  server->Stop();  // idempotent
  EXPECT_TRUE(WaitClosed(fd, 20000));
  puller.join();
  // The pull may have finished first; if not, it saw the connection go.
  EXPECT_TRUE(pulled.ok() || pulled.code() == StatusCode::kUnavailable) << pulled.ToString();
  EXPECT_FALSE(server->Start("127.0.0.1").ok());  // a stopped server stays stopped
  server.reset();
  close(fd);
}

TEST(ObjectTransferTest, ProcessTransferKeyFollowsTheCredentials) {
  ASSERT_FALSE(security::Enabled());
  EXPECT_FALSE(ProcessTransferKey().enabled);
  security::Credentials creds = security::FromToken(std::string(64, 'a'), "test");
  ASSERT_TRUE(security::SetProcessCredentials(creds).ok());
  TransferKey a = ProcessTransferKey(), b = ProcessTransferKey();
  ASSERT_TRUE(security::SetProcessCredentials(security::FromToken(std::string(64, 'b'), "t")).ok());
  TransferKey other = ProcessTransferKey();
  ASSERT_TRUE(security::SetProcessCredentials(security::Credentials{}).ok());
  EXPECT_TRUE(a.enabled);
  EXPECT_EQ(a.key.size(), 32u);
  EXPECT_EQ(a.key, b.key);  // every process of a cluster derives the same key
  EXPECT_NE(a.key, other.key);
  EXPECT_NE(a.key, creds.secret_key);  // domain-separated from the CURVE keys
  EXPECT_NE(a.key, creds.public_key);
}

}  // namespace
}  // namespace orrery::objects::testing
