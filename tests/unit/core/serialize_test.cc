// Argument and result serialization (orrery/api/serialize.h): what a user can pass to a
// remote call must come back equal, and a type mismatch must be a ConvertError with a
// readable message, never a crash or a foreign exception type.
#include "orrery/api/serialize.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace orrery::internal {
namespace {

using ::testing::HasSubstr;

template <typename T>
T RoundTrip(const T& value) {
  return Unpack<T>(Pack(value), "test value");
}

struct Point {
  int x = 0;
  int y = 0;
  bool operator==(const Point& o) const { return x == o.x && y == o.y; }
  MSGPACK_DEFINE(x, y);
};

struct Shape {
  std::string name;
  std::vector<Point> points;
  std::map<std::string, double> tags;
  std::optional<Point> anchor;
  bool operator==(const Shape& o) const {
    return name == o.name && points == o.points && tags == o.tags && anchor == o.anchor;
  }
  MSGPACK_DEFINE(name, points, tags, anchor);
};

TEST(SerializeTest, BuiltInScalarsRoundTrip) {
  EXPECT_EQ(RoundTrip(0), 0);
  EXPECT_EQ(RoundTrip(-42), -42);
  EXPECT_EQ(RoundTrip(std::numeric_limits<int64_t>::min()), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(RoundTrip(std::numeric_limits<int64_t>::max()), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(RoundTrip(std::numeric_limits<uint64_t>::max()), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(RoundTrip(true), true);
  EXPECT_EQ(RoundTrip(false), false);
  EXPECT_DOUBLE_EQ(RoundTrip(3.25), 3.25);
  EXPECT_FLOAT_EQ(RoundTrip(-1.5f), -1.5f);
  EXPECT_EQ(RoundTrip('x'), 'x');
}

TEST(SerializeTest, StringsRoundTripIncludingEmbeddedNulAndBinary) {
  EXPECT_EQ(RoundTrip(std::string()), "");
  EXPECT_EQ(RoundTrip(std::string("hello")), "hello");
  std::string binary("a\0b\xff\x80z", 6);
  EXPECT_EQ(RoundTrip(binary), binary);
  std::string big(100000, 'q');
  EXPECT_EQ(RoundTrip(big), big);
}

TEST(SerializeTest, StlContainersRoundTrip) {
  std::vector<int> v{1, 2, 3, -4};
  EXPECT_EQ(RoundTrip(v), v);
  EXPECT_EQ(RoundTrip(std::vector<int>{}), std::vector<int>{});
  std::map<std::string, double> m{{"CPU", 1.5}, {"TPU", 4}};
  EXPECT_EQ(RoundTrip(m), m);
  std::unordered_map<int, std::string> um{{1, "one"}, {2, "two"}};
  EXPECT_EQ(RoundTrip(um), um);
  std::set<std::string> s{"a", "b", "c"};
  EXPECT_EQ(RoundTrip(s), s);
  std::pair<int, std::string> p{7, "seven"};
  EXPECT_EQ(RoundTrip(p), p);
  std::tuple<int, double, std::string> t{1, 2.5, "three"};
  EXPECT_EQ(RoundTrip(t), t);
  std::array<int, 3> a{9, 8, 7};
  EXPECT_EQ(RoundTrip(a), a);
  std::optional<int> some = 5;
  std::optional<int> none;
  EXPECT_EQ(RoundTrip(some), some);
  EXPECT_EQ(RoundTrip(none), none);
}

TEST(SerializeTest, NestedContainersRoundTrip) {
  std::vector<std::map<std::string, std::vector<int>>> nested{
      {{"a", {1, 2}}, {"b", {}}},
      {},
      {{"c", {3}}},
  };
  EXPECT_EQ(RoundTrip(nested), nested);
  std::map<int, std::vector<std::vector<std::string>>> deep{{1, {{"x"}, {}, {"y", "z"}}}};
  EXPECT_EQ(RoundTrip(deep), deep);
}

TEST(SerializeTest, UserStructWithMsgpackDefineRoundTrips) {
  Point p{3, -4};
  EXPECT_EQ(RoundTrip(p), p);
  Shape shape{"triangle", {{0, 0}, {1, 0}, {0, 1}}, {{"area", 0.5}}, Point{1, 1}};
  EXPECT_EQ(RoundTrip(shape), shape);
  std::vector<Shape> shapes{shape, Shape{"empty", {}, {}, std::nullopt}};
  EXPECT_EQ(RoundTrip(shapes), shapes);
}

TEST(SerializeTest, PackNilIsMsgpackNil) {
  msgpack::object_handle oh = msgpack::unpack(PackNil().data(), PackNil().size());
  EXPECT_EQ(oh.get().type, msgpack::type::NIL);
}

TEST(SerializeTest, TypeMismatchIsConvertError) {
  EXPECT_THROW(Unpack<int>(Pack(std::string("not a number")), "result"), ConvertError);
  EXPECT_THROW(Unpack<std::string>(Pack(12), "result"), ConvertError);
  EXPECT_THROW((Unpack<std::map<std::string, int>>(Pack(std::vector<int>{1, 2}), "result")),
               ConvertError);
  EXPECT_THROW(Unpack<std::vector<int>>(Pack(std::vector<std::string>{"a"}), "result"),
               ConvertError);
  EXPECT_THROW(Unpack<Point>(Pack(std::string("point?")), "result"), ConvertError);
  EXPECT_THROW(Unpack<bool>(Pack(1.5), "result"), ConvertError);
}

TEST(SerializeTest, IntegerOutOfRangeIsConvertError) {
  EXPECT_THROW(Unpack<uint8_t>(Pack(300), "result"), ConvertError);
  EXPECT_THROW(Unpack<unsigned>(Pack(-1), "result"), ConvertError);
  EXPECT_THROW(Unpack<int32_t>(Pack(int64_t{1} << 40), "result"), ConvertError);
}

TEST(SerializeTest, FieldTypeMismatchInsideUserStructIsConvertError) {
  // A Point whose second field is a string.
  auto bytes = Pack(std::make_tuple(1, std::string("two")));
  EXPECT_THROW(Unpack<Point>(bytes, "result"), ConvertError);
}

TEST(SerializeTest, MalformedBytesAreConvertError) {
  EXPECT_THROW(Unpack<int>(std::string(), "result"), ConvertError);
  EXPECT_THROW(Unpack<int>(std::string("\xc1", 1), "result"), ConvertError);  // never used
  std::string truncated = Pack(std::string("a longer string value"));
  truncated.resize(truncated.size() / 2);
  EXPECT_THROW(Unpack<std::string>(truncated, "result"), ConvertError);
}

TEST(SerializeTest, ConvertErrorMessageNamesWhatWasConverted) {
  try {
    Unpack<int>(Pack(std::string("x")), "the thing");
    FAIL() << "expected ConvertError";
  } catch (const ConvertError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the thing"));
  }
}

TEST(SerializeTest, MsgpackTypeNameIsReadable) {
  auto name_of = [](const std::string& bytes) {
    msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
    return std::string(MsgpackTypeName(oh.get()));
  };
  std::set<std::string> names{name_of(Pack(std::string("s"))),     name_of(Pack(1)),
                              name_of(Pack(std::vector<int>{})),   name_of(PackNil()),
                              name_of(Pack(std::map<int, int>{})), name_of(Pack(true))};
  EXPECT_EQ(names.size(), 6u) << "each wire type should have its own name";
  for (const auto& n : names) EXPECT_FALSE(n.empty());
}

// Large values take the fresh-memory path (ReserveFresh, CopyBytes on several threads): the
// bytes must arrive exactly, at every size around the thresholds and at odd lengths.
TEST(SerializeTest, LargeValuesRoundTripByteForByte) {
  for (size_t n : {kFreshValueBytes - 1, kFreshValueBytes, kParallelCopyBytes + 4097,
                   3 * kParallelCopyBytes + 13}) {
    std::vector<unsigned char> bytes(n);
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(i * 131 + (i >> 12));
    EXPECT_EQ(RoundTrip(bytes), bytes) << n << " bytes";
    std::vector<uint32_t> words(n / 4 + 1);
    for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<uint32_t>(i * 2654435761u);
    EXPECT_EQ(RoundTrip(words), words) << words.size() << " words";
    // Into a vector that already has room: the vector's own memory is reused.
    std::vector<unsigned char> into(n + 100, 9);
    const unsigned char* before = into.data();
    std::string packed = Pack(bytes);
    msgpack::object_handle oh = UnpackUntrusted(packed.data(), packed.size(), kValueUnpackLimits);
    oh.get().convert(into);
    EXPECT_EQ(into, bytes);
    EXPECT_EQ(into.data(), before);
  }
}

TEST(SerializeTest, CopyBytesCopiesEveryByteOnce) {
  const size_t n = 2 * kParallelCopyBytes + 4095;
  std::vector<char> src(n), dst(n + 2, 'x');
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<char>(i % 251);
  CopyBytes(dst.data() + 1, src.data(), n);
  EXPECT_EQ(dst.front(), 'x');
  EXPECT_EQ(dst.back(), 'x');
  EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin() + 1));
  CopyBytes(dst.data(), src.data(), 0);  // nothing, and no access
  EXPECT_EQ(dst.front(), 'x');
}

TEST(SerializeTest, PackIntoALargeSpanIsExact) {
  std::vector<unsigned char> bytes(kParallelCopyBytes * 2 + 7, 5);
  bytes.back() = 6;
  size_t size = PackedSize(bytes);
  std::string out(size + 1, '\0');
  PackInto(bytes, out.data(), size);
  EXPECT_EQ(out.substr(0, size), Pack(bytes));
  EXPECT_EQ(out.back(), '\0');
}

}  // namespace
}  // namespace orrery::internal
