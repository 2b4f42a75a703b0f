// orrery::Buffer (orrery/buffer.h) and the serialization pieces of the object plane
// (orrery/api/serialize.h): sharing unpacked bytes under a ScopedUnpackKeeper, PackedSize
// and PackInto, contiguous vectors as one ext, and ContiguousPayload.
#include "orrery/buffer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "orrery/api/serialize.h"

namespace orrery::internal {
namespace {

using ::testing::HasSubstr;

bool Inside(const void* p, const std::string& s) {
  auto at = reinterpret_cast<uintptr_t>(p);
  auto begin = reinterpret_cast<uintptr_t>(s.data());
  return at >= begin && at < begin + s.size();
}

struct Blob {
  std::string name;
  Buffer bytes;
  MSGPACK_DEFINE(name, bytes);
};

struct Series {
  std::string label;
  std::vector<double> values;
  std::map<std::string, int> tags;
  bool operator==(const Series& o) const {
    return label == o.label && values == o.values && tags == o.tags;
  }
  MSGPACK_DEFINE(label, values, tags);
};

struct Nested {
  std::vector<Series> series;
  std::optional<Series> extra;
  std::tuple<int, std::string, bool> misc;
  MSGPACK_DEFINE(series, extra, misc);
};

TEST(BufferTest, Basics) {
  Buffer none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(none.view(), "");
  EXPECT_TRUE(none.ToVector().empty());

  Buffer s(std::string("hello"));
  EXPECT_EQ(s.size(), 5u);
  EXPECT_FALSE(s.empty());
  EXPECT_EQ(s.view(), "hello");
  EXPECT_EQ(s.ToString(), "hello");
  EXPECT_EQ(s.ToVector(), (std::vector<uint8_t>{'h', 'e', 'l', 'l', 'o'}));
  Buffer copy = s;  // shares, does not copy
  EXPECT_EQ(copy.data(), s.data());

  Buffer v(std::vector<uint8_t>{1, 2, 3});
  EXPECT_EQ(v.ToVector(), (std::vector<uint8_t>{1, 2, 3}));

  std::string source("copied bytes");
  Buffer c = Buffer::Copy(source.data(), source.size());
  EXPECT_NE(static_cast<const void*>(c.data()), static_cast<const void*>(source.data()));
  source[0] = 'X';
  EXPECT_EQ(c.view(), "copied bytes");

  auto storage = std::make_shared<std::vector<uint8_t>>(100, uint8_t{7});
  {
    Buffer view(storage->data() + 10, 20, storage);
    EXPECT_EQ(view.data(), storage->data() + 10);
    EXPECT_EQ(view.size(), 20u);
    EXPECT_EQ(storage.use_count(), 2);
    std::weak_ptr<std::vector<uint8_t>> weak = storage;
    storage.reset();  // the view keeps the memory alive
    EXPECT_FALSE(weak.expired());
    EXPECT_EQ(view.data()[19], 7);
    storage = weak.lock();
  }
  EXPECT_EQ(storage.use_count(), 1);
}

TEST(BufferTest, UnpackWithoutKeeperCopies) {
  Buffer b(std::string("payload bytes\0with nul", 22));
  std::string packed = Pack(b);
  EXPECT_EQ(uint8_t(packed[0]), 0xc4) << "a Buffer packs as bin";
  Buffer back = Unpack<Buffer>(packed, "buffer");
  EXPECT_EQ(back.view(), b.view());
  EXPECT_FALSE(Inside(back.data(), packed));
  packed.assign(packed.size(), '\0');
  EXPECT_EQ(back.view(), b.view());
}

TEST(BufferTest, UnpackWithKeeperSharesTheInput) {
  auto input = std::make_shared<std::string>(Pack(Buffer(std::string(1000, 'z'))));
  std::weak_ptr<std::string> weak = input;
  Buffer back;
  {
    ScopedUnpackKeeper keep(input->data(), input->size(), input);
    long before = input.use_count();
    back = Unpack<Buffer>(input->data(), input->size(), "buffer");
    EXPECT_EQ(input.use_count(), before + 1);
  }
  EXPECT_TRUE(Inside(back.data(), *input));
  EXPECT_EQ(back.view(), std::string(1000, 'z'));
  input.reset();  // the view keeps the input alive
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(back.view(), std::string(1000, 'z'));
}

TEST(BufferTest, KeeperOnlySharesBytesInsideItsRangeAndNests) {
  auto input = std::make_shared<std::string>(Pack(Blob{"n", Buffer(std::string("shared"))}));
  auto other = std::make_shared<std::string>(64, 'o');
  {
    ScopedUnpackKeeper keep(other->data(), other->size(), other);
    Blob b = Unpack<Blob>(*input, "blob");  // not other's bytes: a copy
    EXPECT_FALSE(Inside(b.bytes.data(), *input));
    EXPECT_EQ(b.bytes.view(), "shared");
    EXPECT_EQ(other.use_count(), 2);
  }
  {
    ScopedUnpackKeeper outer(input->data(), input->size(), input);
    ScopedUnpackKeeper inner(other->data(), other->size(), other);
    Blob b = Unpack<Blob>(*input, "blob");  // the outer keeper holds them
    EXPECT_TRUE(Inside(b.bytes.data(), *input));
    EXPECT_EQ(b.bytes.view(), "shared");
    EXPECT_EQ(b.bytes.keeper(), input);
  }
  Blob after = Unpack<Blob>(*input, "blob");  // every scope ended: a copy again
  EXPECT_FALSE(Inside(after.bytes.data(), *input));
}

TEST(BufferTest, UnpackAcceptsStrAndRejectsOtherTypes) {
  EXPECT_EQ(Unpack<Buffer>(Pack(std::string("text")), "buffer").view(), "text");
  EXPECT_TRUE(Unpack<Buffer>(Pack(std::string()), "buffer").empty());
  EXPECT_TRUE(Unpack<Buffer>(Pack(Buffer()), "buffer").empty());
  try {
    Unpack<Buffer>(Pack(42), "buffer");
    FAIL() << "expected ConvertError";
  } catch (const ConvertError& e) {
    EXPECT_THAT(e.what(), HasSubstr("expected binary"));
  }
  std::string truncated = Pack(Buffer(std::string(300, 'b')));
  truncated.resize(100);
  EXPECT_THROW(Unpack<Buffer>(truncated, "buffer"), ConvertError);
}

template <typename T>
void ExpectSizesMatch(const T& value) {
  std::string packed = Pack(value);
  EXPECT_EQ(PackedSize(value), packed.size());
  std::string into(packed.size() + 1, '\x5a');  // one guard byte past the end
  PackInto(value, into.data(), packed.size());
  EXPECT_EQ(into.substr(0, packed.size()), packed);
  EXPECT_EQ(into.back(), '\x5a');
}

TEST(PackedSizeTest, MatchesPackForManyTypes) {
  ExpectSizesMatch(0);
  ExpectSizesMatch(-1);
  ExpectSizesMatch(int64_t{1} << 40);
  ExpectSizesMatch(std::numeric_limits<uint64_t>::max());
  ExpectSizesMatch(3.5);
  ExpectSizesMatch(true);
  ExpectSizesMatch(std::string());
  ExpectSizesMatch(std::string(31, 's'));
  ExpectSizesMatch(std::string(70000, 's'));
  ExpectSizesMatch(std::map<std::string, int>{{"a", 1}, {"bb", 300}});
  ExpectSizesMatch(std::vector<std::string>{"x", "", std::string(300, 'y')});
  ExpectSizesMatch(Buffer(std::string(100000, 'b')));
  ExpectSizesMatch(Buffer());
  ExpectSizesMatch(std::vector<double>(12345, 1.25));
  ExpectSizesMatch(std::vector<int8_t>{1, -2});
  ExpectSizesMatch(std::vector<uint16_t>{});
  ExpectSizesMatch(std::vector<bool>{true, false});
  Series s{"s", {1, 2, 3}, {{"k", 1}}};
  ExpectSizesMatch(Nested{{s, Series{}}, s, {7, "seven", true}});
  ExpectSizesMatch(Blob{"blob", Buffer(std::string(5000, 'q'))});
}

TEST(PackedSizeTest, PackIntoTheWrongSizeThrowsWithoutWritingPastTheEnd) {
  std::string value(100, 'v');
  size_t size = PackedSize(value);
  std::string small(size, '\0');
  small.push_back('\x5a');
  EXPECT_THROW(PackInto(value, small.data(), size - 1), std::length_error);
  EXPECT_EQ(small[size - 1], '\0');  // the payload that did not fit was not written
  EXPECT_EQ(small.back(), '\x5a');
  std::string large(size + 10, '\0');
  EXPECT_THROW(PackInto(value, large.data(), large.size()), std::length_error);
}

// The ext type code of packed bytes that hold one ext at the top level; -1 otherwise.
int ExtTypeOf(const std::string& packed) {
  auto oh = UnpackUntrusted(packed.data(), packed.size(), kValueUnpackLimits);
  return oh.get().type == msgpack::type::EXT ? oh.get().via.ext.type() : -1;
}

// An ext32 of `type` holding `payload`.
std::string Ext32(int8_t type, const std::string& payload, uint32_t declared) {
  std::string s(1, '\xc9');
  for (int shift = 24; shift >= 0; shift -= 8) s.push_back(char((declared >> shift) & 0xff));
  s.push_back(char(type));
  return s + payload;
}

template <typename T>
void ExpectContiguousRoundTrip(int8_t code) {
  using L = std::numeric_limits<T>;
  std::vector<T> v{T(0), T(1), L::max(), L::lowest(), L::min(), T(42)};
  std::string packed = Pack(v);
  EXPECT_EQ(ExtTypeOf(packed), code);
  EXPECT_EQ(packed.size(), PackedSize(v));
  EXPECT_EQ(Unpack<std::vector<T>>(packed, "v"), v);
  EXPECT_EQ(Unpack<std::vector<T>>(Pack(std::vector<T>{}), "v"), std::vector<T>{});
  // Unaligned input: the elements start at an odd address.
  std::string shifted = "x" + packed;
  EXPECT_EQ(Unpack<std::vector<T>>(shifted.data() + 1, packed.size(), "v"), v);
}

TEST(ContiguousVectorTest, EachKindRoundTripsAsOneExt) {
  ExpectContiguousRoundTrip<int8_t>(kExtInt8);
  ExpectContiguousRoundTrip<int16_t>(kExtInt16);
  ExpectContiguousRoundTrip<int32_t>(kExtInt32);
  ExpectContiguousRoundTrip<int64_t>(kExtInt64);
  ExpectContiguousRoundTrip<long long>(kExtInt64);
  ExpectContiguousRoundTrip<uint16_t>(kExtUint16);
  ExpectContiguousRoundTrip<uint32_t>(kExtUint32);
  ExpectContiguousRoundTrip<uint64_t>(kExtUint64);
  ExpectContiguousRoundTrip<float>(kExtFloat);
  ExpectContiguousRoundTrip<double>(kExtDouble);
}

TEST(ContiguousVectorTest, PayloadIsTheRawLittleEndianElements) {
  std::vector<double> v(10000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i) / 3;
  std::string packed = Pack(v);
  ASSERT_EQ(packed.size(), 6 + v.size() * sizeof(double));  // ext32 header, then the elements
  EXPECT_EQ(packed.compare(6, std::string::npos, reinterpret_cast<const char*>(v.data()),
                           v.size() * sizeof(double)),
            0);
  EXPECT_EQ(Pack(std::vector<uint16_t>{0x0102}), std::string("\xd5\x24\x02\x01", 4));
}

TEST(ContiguousVectorTest, OtherVectorsKeepTheirEncoding) {
  EXPECT_EQ(ExtTypeOf(Pack(std::vector<bool>{true})), -1);
  EXPECT_EQ(ExtTypeOf(Pack(std::vector<std::string>{"a"})), -1);
  EXPECT_EQ(uint8_t(Pack(std::vector<char>{'a'})[0]), 0xc4);         // bin
  EXPECT_EQ(uint8_t(Pack(std::vector<unsigned char>{1})[0]), 0xc4);  // bin
  EXPECT_EQ(Unpack<std::vector<bool>>(Pack(std::vector<bool>{true, false}), "v"),
            (std::vector<bool>{true, false}));
  EXPECT_THROW(Unpack<std::vector<int>>(Pack(std::string("no")), "v"), ConvertError);
  EXPECT_THROW(Unpack<std::vector<int>>(Pack(std::vector<std::string>{"a"}), "v"), ConvertError);
}

TEST(ContiguousVectorTest, UserStructFieldsTakeTheFastPath) {
  Series s{"temps", std::vector<double>(100, 21.5), {{"room", 3}}};
  std::string packed = Pack(s);
  std::string raw = Pack(s.values);
  EXPECT_NE(packed.find(raw), std::string::npos) << "the field is the ext form";
  EXPECT_EQ(Unpack<Series>(packed, "series"), s);
}

TEST(ContiguousVectorTest, TheOldArrayFormStillDecodes) {
  std::string packed;
  StringWriter w{packed};
  msgpack::packer<StringWriter> pk(w);
  pk.pack_array(3);
  pk.pack(1.5);
  pk.pack(-2);
  pk.pack(7u);
  EXPECT_EQ(Unpack<std::vector<double>>(packed, "v"), (std::vector<double>{1.5, -2, 7}));
  EXPECT_EQ(Unpack<std::vector<int64_t>>(Pack(std::make_tuple(1, -2, 3)), "v"),
            (std::vector<int64_t>{1, -2, 3}));
  EXPECT_THROW(Unpack<std::vector<uint8_t>>(Pack(std::make_tuple(300)), "v"), ConvertError);
}

TEST(ContiguousVectorTest, OtherKindsConvertElementWise) {
  std::vector<int32_t> ints{-3, 0, 70000};
  EXPECT_EQ(Unpack<std::vector<double>>(Pack(ints), "v"), (std::vector<double>{-3, 0, 70000}));
  EXPECT_EQ(Unpack<std::vector<int64_t>>(Pack(ints), "v"), (std::vector<int64_t>{-3, 0, 70000}));
  EXPECT_EQ(Unpack<std::vector<double>>(Pack(std::vector<float>{0.5f}), "v"),
            (std::vector<double>{0.5}));
  auto floats = Unpack<std::vector<float>>(Pack(std::vector<double>{0.25, 1e300, -1e300}), "v");
  EXPECT_EQ(floats[0], 0.25f);
  EXPECT_TRUE(std::isinf(floats[1]) && floats[1] > 0);
  EXPECT_TRUE(std::isinf(floats[2]) && floats[2] < 0);
  EXPECT_EQ(Unpack<std::vector<uint16_t>>(Pack(std::vector<int8_t>{0, 127}), "v"),
            (std::vector<uint16_t>{0, 127}));
  try {
    Unpack<std::vector<int8_t>>(Pack(std::vector<int32_t>{1, 300}), "v");
    FAIL() << "expected ConvertError";
  } catch (const ConvertError& e) {
    EXPECT_THAT(e.what(), HasSubstr("element 1"));
  }
  EXPECT_THROW(Unpack<std::vector<uint32_t>>(Pack(std::vector<int16_t>{-1}), "v"), ConvertError);
  EXPECT_THROW(Unpack<std::vector<int>>(Pack(std::vector<double>{1.0}), "v"), ConvertError);
}

TEST(ContiguousVectorTest, MalformedExtsAreRejected) {
  // 12 bytes cannot be doubles.
  try {
    Unpack<std::vector<double>>(Ext32(kExtDouble, std::string(12, '\0'), 12), "v");
    FAIL() << "expected ConvertError";
  } catch (const ConvertError& e) {
    EXPECT_THAT(e.what(), HasSubstr("not a whole number of 8-byte elements"));
  }
  EXPECT_THROW(Unpack<std::vector<float>>(Ext32(kExtDouble, std::string(12, '\0'), 12), "v"),
               ConvertError);
  EXPECT_THROW(Unpack<std::vector<double>>(Ext32(99, std::string(8, '\0'), 8), "v"), ConvertError);
  // Hostile headers: an ext declaring more bytes than follow.
  for (uint32_t declared : {16u, 1u << 30, 0xffffffffu}) {
    std::string lie = Ext32(kExtDouble, std::string(8, '\0'), declared);
    EXPECT_THROW(Unpack<std::vector<double>>(lie, "v"), ConvertError) << declared;
    EXPECT_ANY_THROW(UnpackUntrusted(lie.data(), lie.size(), kControlUnpackLimits)) << declared;
  }
  std::string truncated = Pack(std::vector<double>(100, 1.0));
  truncated.resize(truncated.size() - 1);
  EXPECT_THROW(Unpack<std::vector<double>>(truncated, "v"), ConvertError);
  truncated.resize(3);  // inside the header
  EXPECT_THROW(Unpack<std::vector<double>>(truncated, "v"), ConvertError);
}

TEST(ContiguousPayloadTest, FindsThePayloadOfBinStrAndVectors) {
  auto payload_of = [](const std::string& packed) -> std::optional<std::string> {
    auto p = ContiguousPayload(packed.data(), packed.size());
    if (!p) return std::nullopt;
    EXPECT_TRUE(p->second == 0 || Inside(p->first, packed));
    return std::string(p->first, p->second);
  };
  EXPECT_EQ(payload_of(Pack(Buffer(std::string(70000, 'b')))), std::string(70000, 'b'));
  EXPECT_EQ(payload_of(Pack(Buffer())), "");
  EXPECT_EQ(payload_of(Pack(std::string("short"))), "short");
  EXPECT_EQ(payload_of(Pack(std::string(300, 's'))), std::string(300, 's'));
  std::vector<double> v{1.5, 2.5};
  EXPECT_EQ(payload_of(Pack(v)), std::string(reinterpret_cast<const char*>(v.data()), 16));
  EXPECT_EQ(payload_of(Pack(std::vector<int16_t>{1})), std::string("\x01\x00", 2));  // fixext 2
  EXPECT_EQ(payload_of(Pack(std::vector<int32_t>{})), "");
  EXPECT_EQ(payload_of(Pack(std::vector<uint8_t>{9})), "\x09");
  // Not one contiguous value.
  EXPECT_EQ(payload_of(Pack(42)), std::nullopt);
  EXPECT_EQ(payload_of(Pack(std::map<int, int>{{1, 2}})), std::nullopt);
  EXPECT_EQ(payload_of(Pack(std::vector<std::string>{"a"})), std::nullopt);
  EXPECT_EQ(payload_of(Pack(Series{})), std::nullopt);
  EXPECT_EQ(payload_of(Ext32(99, std::string(8, '\0'), 8)), std::nullopt);            // foreign ext
  EXPECT_EQ(payload_of(Ext32(kExtDouble, std::string(12, '\0'), 12)), std::nullopt);  // 1.5 doubles
  EXPECT_EQ(payload_of(Pack(std::string("abc")) + "x"), std::nullopt);                // trailing
  std::string cut = Pack(std::string(300, 's'));
  EXPECT_EQ(payload_of(cut.substr(0, 100)), std::nullopt);
  EXPECT_EQ(payload_of(cut.substr(0, 2)), std::nullopt);
  EXPECT_EQ(payload_of(std::string()), std::nullopt);
  EXPECT_EQ(payload_of(Ext32(kExtDouble, "", 0xffffffffu)), std::nullopt);
}

}  // namespace
}  // namespace orrery::internal

namespace {
// msgpack-c would convert 2^64 to uint64_t (undefined behaviour) to pack it as an integer;
// Orrery writes that double as a float64, which reads back exactly.
TEST(DoubleEncodingTest, TwoToTheSixtyFourRoundTrips) {
  for (double d : {18446744073709551616.0, -9223372036854775808.0, 1.5, 3.0, -0.0, 1e300}) {
    std::string bytes = orrery::internal::Pack(d);
    EXPECT_EQ(orrery::internal::PackedSize(d), bytes.size()) << d;
    EXPECT_EQ(orrery::internal::Unpack<double>(bytes, "test"), d) << d;
  }
  EXPECT_EQ(uint8_t(orrery::internal::Pack(18446744073709551616.0)[0]), 0xcb);
  for (float f : {18446744073709551616.0f, 2.5f, 7.0f}) {
    std::string bytes = orrery::internal::Pack(f);
    EXPECT_EQ(orrery::internal::PackedSize(f), bytes.size()) << f;
    EXPECT_EQ(orrery::internal::Unpack<float>(bytes, "test"), f) << f;
  }
  EXPECT_EQ(uint8_t(orrery::internal::Pack(18446744073709551616.0f)[0]), 0xca);
}
}  // namespace
