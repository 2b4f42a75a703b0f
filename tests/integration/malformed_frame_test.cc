// Bad input on the wire (docs/protocol.md "Frames"): a raw ZeroMQ DEALER sends malformed frames
// to a worker's socket and to the embedded head's; each gets a kError reply and the process
// keeps serving.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "actors/internal/test_hooks.h"
#include "core/internal/protocol.h"
#include "core/internal/security.h"
#include "remote_functions.h"
#include "test_support.h"

namespace {

using orrery::proto::MsgType;
using orrery_test::kGetTimeoutMs;

std::string Endpoint(const std::string& address) {
  if (address.find("://") != std::string::npos) return address;
  return "tcp://" + address;
}

std::string Header(uint8_t m0, uint8_t m1, uint8_t version, uint8_t type) {
  return std::string{char(m0), char(m1), char(version), char(type)};
}

struct BadMessage {
  const char* what;
  std::vector<std::string> frames;
  // The answer: kError, or for another protocol version the version refusal (its type
  // byte, protocol_wire.h), which a peer of any version reads.
  orrery::proto::MsgType reply = orrery::proto::MsgType::kError;
};

std::vector<BadMessage> BadMessages() {
  using namespace orrery::proto;
  const uint8_t call = uint8_t(MsgType::kCall);
  std::string random_bytes;
  for (int i = 0; i < 64; ++i) random_bytes.push_back(char((i * 73 + 11) % 256));
  return {
      {"an empty frame", {std::string()}},
      {"a short header", {std::string("OR")}},
      {"wrong magic",
       {Header('X', 'Y', kProtocolVersion, call) + orrery::internal::Pack(CallMsg{})}},
      {"wrong version",
       {Header(kMagic0, kMagic1, kProtocolVersion + 7, call) + orrery::internal::Pack(CallMsg{})},
       MsgType(kVersionRefusalType)},
      {"unknown type",
       {Header(kMagic0, kMagic1, kProtocolVersion, 0xfe) + orrery::internal::Pack(CallMsg{})}},
      {"garbage meta",
       {Header(kMagic0, kMagic1, kProtocolVersion, call) + std::string("\xc1\xc1\xc1", 3)}},
      {"wrong meta shape",
       {Header(kMagic0, kMagic1, kProtocolVersion, call) +
        orrery::internal::Pack(std::string("not a call"))}},
      {"random bytes", {random_bytes}},
      {"many frames of junk",
       {std::string("a"), std::string("b"), std::string("c"), std::string("d")}},
  };
}

// Sends `frames` from a fresh DEALER and returns the type of the first decodable frame of
// the reply, or nullopt when no reply came within the deadline.
std::optional<MsgType> SendAndAwaitReply(zmq::context_t& ctx, const std::string& endpoint,
                                         const std::vector<std::string>& frames) {
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  orrery::security::ConfigureClient(dealer);  // a peer of the cluster, not a stranger
  dealer.connect(endpoint);
  for (size_t i = 0; i < frames.size(); ++i) {
    auto flags = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
    dealer.send(zmq::buffer(frames[i]), flags);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(100));
    if (!(item.revents & ZMQ_POLLIN)) continue;
    std::optional<MsgType> type;
    bool more = true;
    while (more) {
      zmq::message_t part;
      if (!dealer.recv(part, zmq::recv_flags::none)) break;
      more = part.more();
      if (!type) {
        auto header = orrery::proto::DecodeHeader(part.data(), part.size());
        if (header.ok()) type = header->type;
        if (orrery::proto::DecodeVersionRefusal(part.data(), part.size(), endpoint)) {
          type = MsgType(orrery::proto::kVersionRefusalType);
        }
      }
    }
    return type;
  }
  return std::nullopt;
}

class MalformedFrameTest : public ::testing::Test {
 protected:
  zmq::context_t ctx_;
};

TEST_F(MalformedFrameTest, WorkerAnswersWithErrorAndKeepsServing) {
  orrery_test::ActorReaper reaper;
  auto c = reaper.Add(orrery::Actor(Counter::Create).Remote(0));
  std::string address = *orrery::Get(c.Task(&Counter::Address).Remote(), kGetTimeoutMs);
  ASSERT_FALSE(address.empty());
  int calls = 0;
  for (const BadMessage& bad : BadMessages()) {
    std::optional<MsgType> reply = SendAndAwaitReply(ctx_, Endpoint(address), bad.frames);
    ASSERT_TRUE(reply.has_value()) << "no decodable reply to " << bad.what;
    EXPECT_EQ(*reply, bad.reply) << "reply to " << bad.what;
    // The worker is still there, with its state.
    EXPECT_EQ(*orrery::Get(c.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), ++calls)
        << "after " << bad.what;
  }
}

TEST_F(MalformedFrameTest, HeadAnswersWithErrorAndKeepsServing) {
  std::string address = orrery::internal::HeadAddressForTest();
  ASSERT_FALSE(address.empty());
  for (const BadMessage& bad : BadMessages()) {
    std::optional<MsgType> reply = SendAndAwaitReply(ctx_, Endpoint(address), bad.frames);
    ASSERT_TRUE(reply.has_value()) << "no decodable reply to " << bad.what;
    EXPECT_EQ(*reply, bad.reply) << "reply to " << bad.what;
    // The head still answers: lookups, cluster info and actor creation.
    EXPECT_EQ(orrery::Nodes().size(), 1u) << "after " << bad.what;
  }
  EXPECT_FALSE(orrery::GetActor<Counter>("no_such_actor").has_value());
  orrery_test::ActorReaper reaper;
  auto c = reaper.Add(orrery::Actor(Counter::Create).Remote(41));
  EXPECT_EQ(*orrery::Get(c.Task(&Counter::Inc).Remote(1), kGetTimeoutMs), 42);
}

}  // namespace
