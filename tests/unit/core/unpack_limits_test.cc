// internal::UnpackUntrusted (orrery/api/serialize.h): what one unpack of untrusted bytes
// may build is bounded by its limits, and a header that lies about its size is refused
// before anything is allocated for it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/internal/protocol.h"
#include "orrery/api/serialize.h"

namespace orrery::internal {
namespace {

// msgpack array32 header announcing n elements.
std::string Array32(uint32_t n) {
  std::string s(1, '\xdd');
  for (int shift = 24; shift >= 0; shift -= 8) s.push_back(char((n >> shift) & 0xff));
  return s;
}

TEST(UnpackLimitsTest, WellFormedValuesUnpack) {
  std::vector<int> v(1000, 7);
  // The result points into its input (str, bin, ext): the bytes must outlive it.
  std::string packed = Pack(v);
  auto oh = UnpackUntrusted(packed.data(), packed.size(), kControlUnpackLimits);
  EXPECT_EQ(oh.get().as<std::vector<int>>(), v);
  EXPECT_EQ(Unpack<std::vector<int>>(Pack(v), "value"), v);
}

TEST(UnpackLimitsTest, HeadersClaimingMoreElementsThanBytesAreRefused) {
  // Each of these asked msgpack-c for gigabytes before a single element was read.
  const std::vector<std::string> lies{
      Array32(0xffffffffu), std::string("\xdf\xff\xff\xff\xff", 5),  // map32 of 4 billion pairs
      Array32(100) + std::string(50, '\xc0'),                        // 100 claimed, 50 present
  };
  for (const auto& bytes : lies) {
    EXPECT_ANY_THROW(UnpackUntrusted(bytes.data(), bytes.size(), kValueUnpackLimits))
        << bytes.size();
    EXPECT_ANY_THROW(UnpackUntrusted(bytes.data(), bytes.size(), kControlUnpackLimits))
        << bytes.size();
  }
}

TEST(UnpackLimitsTest, ControlLimitsBoundTheNumberOfValues) {
  // 256 Ki nils in one array: over the control limit of 64 Ki elements per container...
  size_t n = 256u << 10;
  std::string one = Array32(uint32_t(n)) + std::string(n, '\xc0');
  EXPECT_ANY_THROW(UnpackUntrusted(one.data(), one.size(), kControlUnpackLimits));
  // ...and 4 Mi nils spread over arrays that are each within it: over 1 Mi values in all.
  std::string spread = Array32(64);
  for (int i = 0; i < 64; ++i) spread += Array32(1u << 16) + std::string(1u << 16, '\xc0');
  EXPECT_ANY_THROW(UnpackUntrusted(spread.data(), spread.size(), kControlUnpackLimits));
  // A call's arguments may be that large.
  EXPECT_NO_THROW(UnpackUntrusted(one.data(), one.size(), kValueUnpackLimits));
}

TEST(UnpackLimitsTest, DepthIsBounded) {
  std::string deep(100000, '\x91');  // fixarray of 1, nested 100000 times
  deep.push_back('\xc0');
  EXPECT_ANY_THROW(UnpackUntrusted(deep.data(), deep.size(), kValueUnpackLimits));
  EXPECT_ANY_THROW(UnpackUntrusted(deep.data(), deep.size(), kControlUnpackLimits));
  std::string ok(20, '\x91');
  ok.push_back('\xc0');
  EXPECT_NO_THROW(UnpackUntrusted(ok.data(), ok.size(), kControlUnpackLimits));
}

TEST(UnpackLimitsTest, LargeStringsAreOneValue) {
  // Big payloads inside a control message (an actor's constructor arguments) are fine.
  std::string s(8u << 20, 'x');
  std::string bytes = Pack(std::vector<std::string>{s, "y"});
  auto oh = UnpackUntrusted(bytes.data(), bytes.size(), kControlUnpackLimits);
  EXPECT_EQ(oh.get().as<std::vector<std::string>>()[0].size(), s.size());
}

TEST(UnpackLimitsTest, DecodeMetaRejectsANilBomb) {
  std::string bomb = Array32(1u << 20) + std::string(1u << 20, '\xc0');
  proto::CallMsg out;
  Status s = proto::DecodeMeta(bomb, &out);
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace orrery::internal
