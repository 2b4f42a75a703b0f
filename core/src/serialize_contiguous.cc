// Contiguous vectors (orrery/api/serialize.h): conversions between element kinds, and the
// payload of a packed bin, str or vector. docs/protocol.md "Value encoding".
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "orrery/api/serialize.h"

namespace orrery::internal {

namespace {

// Calls f(E{}) with the element type E of ext type `kind`; returns false for a kind that
// is no contiguous vector.
template <typename F>
bool WithElementType(int8_t kind, F&& f) {
  switch (kind) {
    case kExtInt8:
      return f(int8_t{}), true;
    case kExtInt16:
      return f(int16_t{}), true;
    case kExtInt32:
      return f(int32_t{}), true;
    case kExtInt64:
      return f(int64_t{}), true;
    case kExtUint16:
      return f(uint16_t{}), true;
    case kExtUint32:
      return f(uint32_t{}), true;
    case kExtUint64:
      return f(uint64_t{}), true;
    case kExtFloat:
      return f(float{}), true;
    case kExtDouble:
      return f(double{}), true;
    default:
      return false;
  }
}

const char* KindName(int8_t kind) {
  switch (kind) {
    case kExtInt8:
      return "int8";
    case kExtInt16:
      return "int16";
    case kExtInt32:
      return "int32";
    case kExtInt64:
      return "int64";
    case kExtUint16:
      return "uint16";
    case kExtUint32:
      return "uint32";
    case kExtUint64:
      return "uint64";
    case kExtFloat:
      return "float";
    case kExtDouble:
      return "double";
    default:
      return "?";
  }
}

// Bytes per element of `kind`; 0 for a kind that is no contiguous vector.
size_t ElementSize(int8_t kind) {
  size_t size = 0;
  WithElementType(kind, [&](auto e) { size = sizeof(e); });
  return size;
}

bool IsFloatKind(int8_t kind) { return kind == kExtFloat || kind == kExtDouble; }

template <typename To, typename From>
To ConvertElement(From x, size_t index, int8_t to) {
  if constexpr (std::is_integral_v<To>) {
    // Floating point sources are refused before any element (ContiguousElementCount).
    if (!std::in_range<To>(x)) {
      throw ConvertError("element " + std::to_string(index) + " of the vector (" +
                         std::to_string(x) + ") is out of the range of " + KindName(to));
    }
    return static_cast<To>(x);
  } else if constexpr (std::is_same_v<To, float> && std::is_same_v<From, double>) {
    // A double beyond float's range becomes an infinity (a cast would be undefined).
    if (x > std::numeric_limits<float>::max()) return std::numeric_limits<float>::infinity();
    if (x < -std::numeric_limits<float>::max()) return -std::numeric_limits<float>::infinity();
    return static_cast<float>(x);
  } else {
    return static_cast<To>(x);
  }
}

template <typename From, typename To>
void ConvertElements(const char* in, size_t count, char* out, int8_t to) {
  if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    throw ConvertError("a vector of floating point does not convert to integers");
  } else {
    for (size_t i = 0; i < count; ++i) {
      From x;
      std::memcpy(&x, in + i * sizeof(From), sizeof(From));
      To y = ConvertElement<To>(x, i, to);
      std::memcpy(out + i * sizeof(To), &y, sizeof(To));
    }
  }
}

// Reads an n-byte big-endian length at p (msgpack's byte order).
size_t BigEndian(const char* p, int n) {
  size_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

}  // namespace

size_t ContiguousElementCount(const msgpack::object_ext& ext, int8_t to) {
  int8_t from = ext.type();
  size_t element = ElementSize(from);
  if (element == 0) {
    throw ConvertError("a msgpack ext of type " + std::to_string(from) + " is not a vector of " +
                       KindName(to));
  }
  if (ext.size % element != 0) {
    throw ConvertError("a vector of " + std::string(KindName(from)) + " of " +
                       std::to_string(ext.size) + " bytes: not a whole number of " +
                       std::to_string(element) + "-byte elements");
  }
  if (IsFloatKind(from) && !IsFloatKind(to)) {
    throw ConvertError("a vector of " + std::string(KindName(from)) +
                       " does not convert to a vector of " + KindName(to));
  }
  return ext.size / element;
}

void ConvertContiguousElements(const msgpack::object_ext& ext, int8_t to, void* out, size_t count) {
  char* dst = static_cast<char*>(out);
  bool known = WithElementType(ext.type(), [&](auto from) {
    bool to_known = WithElementType(to, [&](auto target) {
      ConvertElements<decltype(from), decltype(target)>(ext.data(), count, dst, to);
    });
    if (!to_known) throw ConvertError("no vector kind " + std::to_string(to));
  });
  if (!known) ContiguousElementCount(ext, to);  // throws its message
}

std::optional<std::pair<const char*, size_t>> ContiguousPayload(const char* data, size_t size) {
  if (data == nullptr || size == 0) return std::nullopt;
  auto first = static_cast<uint8_t>(data[0]);
  size_t length_bytes = 0;  // of the big-endian length after the first byte
  size_t header = 0;
  size_t length = 0;
  bool ext = false;
  if (first >= 0xa0 && first <= 0xbf) {  // fixstr
    header = 1;
    length = first & 0x1f;
  } else if (first == 0xc4 || first == 0xd9) {  // bin8, str8
    length_bytes = 1;
  } else if (first == 0xc5 || first == 0xda) {  // bin16, str16
    length_bytes = 2;
  } else if (first == 0xc6 || first == 0xdb) {  // bin32, str32
    length_bytes = 4;
  } else if (first >= 0xd4 && first <= 0xd8) {  // fixext 1, 2, 4, 8, 16
    header = 2;
    length = size_t(1) << (first - 0xd4);
    ext = true;
  } else if (first >= 0xc7 && first <= 0xc9) {  // ext8, ext16, ext32
    length_bytes = size_t(1) << (first - 0xc7);
    ext = true;
  } else {
    return std::nullopt;
  }
  if (length_bytes != 0) {
    header = 1 + length_bytes + (ext ? 1 : 0);
    if (size < header) return std::nullopt;
    length = BigEndian(data + 1, int(length_bytes));
  }
  if (size < header || size - header != length) return std::nullopt;
  if (ext) {
    size_t element = ElementSize(static_cast<int8_t>(data[header - 1]));
    if (element == 0 || length % element != 0) return std::nullopt;
  }
  return std::make_pair(data + header, length);
}

}  // namespace orrery::internal
