// A process's object client and its node's object plane together: a free that a process sent
// from one thread rides on its next Create from another (ObjectStoreMsg::freed), so the node
// frees it before making room for the new object even when the kObjectFree itself comes
// later (docs/protocol.md "Objects").
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "objects/internal/node_object_plane.h"
#include "objects/internal/object_client.h"
#include "tests/fakes/recording_outbox.h"

namespace orrery::objects {
namespace {

namespace fs = std::filesystem;
using ::orrery::testing::MakeEnvelope;
using ::orrery::testing::RecordingOutbox;
using ::orrery::testing::SentMessage;
using proto::MsgType;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr uint64_t kOneMiB = 1 << 20;
const char* kClientNode = "ipc:///tmp/orrery-test-node";

class ObjectClientFreedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_->SetSelf("ipc:///tmp/orrery-test-process");
    client_->SetNode(kClientNode);
    // Every Create is refused at once (no arena is needed to see what it carried).
    outbox_.on_send = [this](const SentMessage& m) {
      if (m.type != MsgType::kObjectCreate) return Status::Ok();
      proto::ObjectStoreReplyMsg r;
      r.request_id = m.RequestId();
      r.error_kind = proto::ErrorKind::kObjectStoreFullError;
      r.message = "full";
      client_->OnReply(r);
      return Status::Ok();
    };
  }
  std::vector<std::string> FreedOfCreate(size_t i) {
    auto creates = outbox_.Sent(MsgType::kObjectCreate);
    if (creates.size() <= i) return {"no such Create"};
    return creates[i].As<proto::ObjectStoreMsg>().freed;
  }
  static proto::ObjectLocationMsg At(const std::string& node) { return {node, "", 100}; }

  RecordingOutbox outbox_;
  std::shared_ptr<ObjectClient> client_ = std::make_shared<ObjectClient>(outbox_);
};

TEST_F(ObjectClientFreedTest, ACreateCarriesTheFreesSentToItsNodeSinceTheLastOne) {
  ObjectId here = ObjectId::Random(), elsewhere = ObjectId::Random();
  client_->Free(here, At(kClientNode));
  client_->Free(elsewhere, At("ipc:///tmp/orrery-test-other-node"));
  EXPECT_EQ(outbox_.Count(MsgType::kObjectFree), 2u);  // each free is still sent as it was
  EXPECT_FALSE(client_->Create(ObjectId::Random(), 10, "me").ok());
  EXPECT_THAT(FreedOfCreate(0), ElementsAre(here.Binary()));
  EXPECT_FALSE(client_->Create(ObjectId::Random(), 10, "me").ok());
  EXPECT_THAT(FreedOfCreate(1), IsEmpty());
}

TEST_F(ObjectClientFreedTest, ACreateCarriesOnlyTheLatestFrees) {
  std::vector<std::string> ids;
  for (size_t i = 0; i < proto::kMaxFreedPerCreate + 10; ++i) {
    ObjectId id = ObjectId::Random();
    ids.push_back(id.Binary());
    client_->Free(id, At(kClientNode));
  }
  EXPECT_FALSE(client_->Create(ObjectId::Random(), 10, "me").ok());
  auto freed = FreedOfCreate(0);
  ASSERT_EQ(freed.size(), proto::kMaxFreedPerCreate);
  EXPECT_EQ(freed.front(), ids[10]);
  EXPECT_EQ(freed.back(), ids.back());
}

class ObjectPlaneFreedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string base = fs::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string tmpl = base + "/orrery-plane-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(inbox_.Bind("127.0.0.1").ok());
    ASSERT_TRUE(process_.Bind("127.0.0.1").ok());
    process_.Start([](transport::Envelope&) {});  // the replies are not looked at
    ObjectPlaneOptions o;
    o.node_id = NodeId::Random();
    o.capacity = 8 * kOneMiB;
    o.shm_dir = dir_;
    o.spill_root = dir_ + "/spill";
    plane_ = std::make_unique<NodeObjectPlane>(o, inbox_);
    ASSERT_TRUE(plane_->Start().ok());
  }
  void TearDown() override {
    plane_.reset();
    process_.Stop();
    fs::remove_all(dir_);
  }
  // Creates an object of `size` written by the test's process and owned by `owner` (the
  // process itself by default).
  Status Create(const ObjectId& id, uint64_t size, std::vector<std::string> freed = {},
                std::string owner = "") {
    proto::ObjectStoreMsg m;
    m.reply_to = process_.address();
    m.owner = owner.empty() ? process_.address() : owner;
    m.object_id = id.Binary();
    m.size = size;
    m.freed = std::move(freed);
    auto create = MakeEnvelope(MsgType::kObjectCreate, m);
    auto s = plane_->Handle(create);
    return s && s->ok() ? Status::Ok() : Status::Internal("create");
  }
  Status Seal(const ObjectId& id) {
    proto::ObjectStoreMsg m;
    m.reply_to = process_.address();
    m.object_id = id.Binary();
    auto seal = MakeEnvelope(MsgType::kObjectSeal, m);
    auto s = plane_->Handle(seal);
    return s && s->ok() ? Status::Ok() : Status::Internal("seal");
  }
  Status Put(const ObjectId& id, uint64_t size, std::vector<std::string> freed = {},
             std::string owner = "") {
    if (Status s = Create(id, size, std::move(freed), std::move(owner)); !s.ok()) return s;
    return Seal(id);
  }
  void Free(const ObjectId& id) {
    auto free = MakeEnvelope(MsgType::kObjectFree, proto::ObjectFreeMsg{{id.Binary()}});
    ASSERT_TRUE(plane_->Handle(free).has_value());
  }

  std::string dir_;
  transport::Inbox inbox_;
  transport::Inbox process_;
  std::unique_ptr<NodeObjectPlane> plane_;
};

TEST_F(ObjectPlaneFreedTest, ACreateFreesWhatItsSenderFreedBeforeMakingRoom) {
  ObjectId first = ObjectId::Random(), second = ObjectId::Random();
  ASSERT_TRUE(Put(first, 5 * kOneMiB).ok());
  // The kObjectFree of `first` has not come: the Create names it.
  ASSERT_TRUE(Put(second, 5 * kOneMiB, {first.Binary()}).ok());
  auto usage = plane_->Usage();
  EXPECT_EQ(usage.num_objects, 1u);
  EXPECT_EQ(usage.spilled_bytes, 0u);  // nothing was spilled to make room
  // The late kObjectFree changes nothing more.
  Free(first);
  EXPECT_EQ(plane_->Usage().num_objects, 1u);
}

TEST_F(ObjectPlaneFreedTest, ACreateFreesNothingItsSenderDoesNotOwn) {
  ObjectId others = ObjectId::Random();
  ASSERT_TRUE(Put(others, kOneMiB, {}, "ipc:///tmp/orrery-test-another-process").ok());
  ASSERT_TRUE(Put(ObjectId::Random(), kOneMiB, {others.Binary()}).ok());
  EXPECT_EQ(plane_->Usage().num_objects, 2u);
}

// A result's seal comes from the worker, its owner's free from the caller, on another socket:
// a free handled first is done at the seal (it was dropped, and the object kept until its
// owner exited).
TEST_F(ObjectPlaneFreedTest, AFreeThatComesBeforeTheSealIsDoneAtTheSeal) {
  ObjectId id = ObjectId::Random();
  ASSERT_TRUE(Create(id, kOneMiB).ok());
  Free(id);
  ASSERT_TRUE(Seal(id).ok());
  auto usage = plane_->Usage();
  EXPECT_EQ(usage.num_objects, 0u);
  EXPECT_EQ(usage.used_bytes, 0u);
}

TEST_F(ObjectPlaneFreedTest, MalformedFreedIdsInACreateAreSkipped) {
  ObjectId first = ObjectId::Random();
  ASSERT_TRUE(Put(first, kOneMiB).ok());
  std::vector<std::string> junk(proto::kMaxFreedPerCreate * 4, "not an id");
  junk.push_back(first.Binary());  // past the bound: not looked at
  ASSERT_TRUE(Put(ObjectId::Random(), kOneMiB, junk).ok());
  EXPECT_EQ(plane_->Usage().num_objects, 2u);
}

}  // namespace
}  // namespace orrery::objects
