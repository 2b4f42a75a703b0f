// Identifiers (orrery/ids.h): random, printable as 32 hex characters, parseable back, and
// FromHex turns every malformed input into Nil instead of a half-parsed id.
#include "orrery/ids.h"

#include <gtest/gtest.h>

#include <string>
#include <unordered_set>

namespace orrery {
namespace {

TEST(IdsTest, NilIsAllZeros) {
  UniqueId nil = UniqueId::Nil();
  EXPECT_TRUE(nil.IsNil());
  EXPECT_TRUE(UniqueId().IsNil());
  EXPECT_EQ(nil.Hex(), std::string(32, '0'));
  EXPECT_EQ(nil.Binary(), std::string(UniqueId::kSize, '\0'));
  EXPECT_TRUE(ActorId().IsNil());
}

TEST(IdsTest, RandomIdsAreNotNilAndDistinct) {
  std::unordered_set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    UniqueId id = UniqueId::Random();
    EXPECT_FALSE(id.IsNil());
    EXPECT_TRUE(seen.insert(id.Hex()).second) << "duplicate id " << id.Hex();
  }
}

TEST(IdsTest, HexIs32LowercaseHexCharacters) {
  UniqueId id = UniqueId::Random();
  std::string hex = id.Hex();
  ASSERT_EQ(hex.size(), 32u);
  for (char c : hex) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << hex;
}

TEST(IdsTest, HexRoundTrip) {
  for (int i = 0; i < 100; ++i) {
    UniqueId id = UniqueId::Random();
    UniqueId back = UniqueId::FromHex(id.Hex());
    EXPECT_EQ(back, id);
    EXPECT_EQ(back.Hex(), id.Hex());
  }
  std::string known = "00112233445566778899aabbccddeeff";
  UniqueId parsed = UniqueId::FromHex(known);
  EXPECT_EQ(parsed.Hex(), known);
  EXPECT_EQ(parsed.data()[0], 0x00);
  EXPECT_EQ(parsed.data()[1], 0x11);
  EXPECT_EQ(parsed.data()[15], 0xff);
}

TEST(IdsTest, BinaryRoundTrip) {
  UniqueId id = UniqueId::Random();
  std::string bin = id.Binary();
  ASSERT_EQ(bin.size(), UniqueId::kSize);
  EXPECT_EQ(UniqueId::FromBinary(bin), id);
}

TEST(IdsTest, FromHexOnBadInputIsNil) {
  const std::string good = "00112233445566778899aabbccddeeff";
  for (const std::string& bad : {
           std::string(),
           std::string("abc"),
           good.substr(0, 31),                               // one short
           good + "0",                                       // one long
           good + good,                                      // twice as long
           std::string("zz112233445566778899aabbccddeeff"),  // not hex
           std::string("00112233445566778899aabbccddee-f"),
           std::string(" 0112233445566778899aabbccddeeff"),
           std::string("0x112233445566778899aabbccddeeff"),
           std::string("00112233445566778899aabbccdd\0eff", 32),
       }) {
    EXPECT_TRUE(UniqueId::FromHex(bad).IsNil()) << "input '" << bad << "'";
    EXPECT_TRUE(ActorId::FromHex(bad).IsNil()) << "input '" << bad << "'";
  }
}

TEST(IdsTest, TypedIdsKeepTheirBytes) {
  ActorId a = ActorId::Random();
  EXPECT_FALSE(a.IsNil());
  EXPECT_EQ(ActorId::FromHex(a.Hex()), a);
  ObjectId o(UniqueId::FromBinary(a.Binary()));
  EXPECT_EQ(o.Hex(), a.Hex());
  NodeId n = NodeId::Random();
  EXPECT_NE(n.Hex(), a.Hex());
}

TEST(IdsTest, OrderingAndHashingAreConsistent) {
  UniqueId a = UniqueId::FromHex("00000000000000000000000000000001");
  UniqueId b = UniqueId::FromHex("00000000000000000000000000000002");
  EXPECT_TRUE(a < b);
  EXPECT_FALSE(b < a);
  EXPECT_NE(a, b);
  std::unordered_set<ActorId, IdHash> set;
  ActorId x = ActorId::Random();
  set.insert(x);
  set.insert(ActorId::FromHex(x.Hex()));
  EXPECT_EQ(set.size(), 1u);
  EXPECT_EQ(IdHash()(x), IdHash()(ActorId::FromHex(x.Hex())));
}

}  // namespace
}  // namespace orrery
