// Argument and result serialization with msgpack-c. Built-in types and STL containers work
// out of the box; user types add MSGPACK_DEFINE(field, ...). A std::vector of numbers packs
// as one msgpack ext holding the raw elements (docs/protocol.md "Value encoding").
#pragma once

#ifndef MSGPACK_NO_BOOST
#define MSGPACK_NO_BOOST
#endif
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <msgpack.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "orrery/buffer.h"

namespace orrery::internal {

// What one unpack of bytes from a peer, Redis or a file may build (docs/protocol.md
// "Limits"). msgpack-c allocates a container's elements when it reads the container's
// header, before the elements arrive, and builds a 24-byte object per encoded value, so
// without limits a 5-byte header asks for 64 GiB and a 64 MiB array of nils for 1.5 GiB.
struct UnpackLimits {
  size_t max_depth;      // nesting of arrays and maps
  size_t max_container;  // elements of one array, pairs of one map
  size_t max_objects;    // values in the whole message; 0: at most one per input byte
};

// Control messages (the meta of a frame, the zygote's requests): small structs.
inline constexpr UnpackLimits kControlUnpackLimits{32, 1u << 16, 1u << 20};
// Call arguments and results: user values, as large as the message that carries them.
inline constexpr UnpackLimits kValueUnpackLimits{256, 0xffffffffu, 0};

// Unpacks one msgpack value from untrusted bytes within `limits`. On top of `limits`, no
// container may claim more elements than there are bytes left (each element takes at
// least one). Throws (a std::exception) on malformed input or a limit reached; the caller
// turns that into its own error. The str, bin and ext values of the result point into
// [data, data + size) (nothing is copied): convert the result before those bytes go away.
msgpack::object_handle UnpackUntrusted(const char* data, size_t size, const UnpackLimits& limits);

// Names msgpack's wire type for error messages ("string", "integer", ...).
const char* MsgpackTypeName(const msgpack::object& o);

// Thrown (and caught inside Orrery) when a value has the wrong wire type.
class ConvertError : public std::exception {
 public:
  explicit ConvertError(std::string m) : message_(std::move(m)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

// ---- Contiguous vectors: std::vector<T> of numbers as one ext of raw elements. ----

// The ext type codes, one per element kind (docs/protocol.md "Value encoding"). uint8 has
// none: vector<unsigned char> and vector<char> are msgpack bin.
inline constexpr int8_t kExtInt8 = 32;
inline constexpr int8_t kExtInt16 = 33;
inline constexpr int8_t kExtInt32 = 34;
inline constexpr int8_t kExtInt64 = 35;
inline constexpr int8_t kExtUint16 = 36;
inline constexpr int8_t kExtUint32 = 37;
inline constexpr int8_t kExtUint64 = 38;
inline constexpr int8_t kExtFloat = 39;
inline constexpr int8_t kExtDouble = 40;

// The ext type code of vector<T>'s elements; 0 when vector<T> keeps msgpack's own form
// (bool, the char types, long double, anything not arithmetic).
template <typename T>
constexpr int8_t ContiguousExtType() {
  using U = std::remove_cv_t<T>;
  if constexpr (!std::is_arithmetic_v<U> || std::is_same_v<U, bool> || std::is_same_v<U, char> ||
                std::is_same_v<U, unsigned char> || std::is_same_v<U, wchar_t> ||
                std::is_same_v<U, char8_t> || std::is_same_v<U, char16_t> ||
                std::is_same_v<U, char32_t>) {
    return 0;
  } else if constexpr (std::is_floating_point_v<U>) {
    if constexpr (std::is_same_v<U, float> && sizeof(U) == 4) return kExtFloat;
    if constexpr (std::is_same_v<U, double> && sizeof(U) == 8) return kExtDouble;
    return 0;
  } else if constexpr (std::is_signed_v<U>) {
    return sizeof(U) == 1   ? kExtInt8
           : sizeof(U) == 2 ? kExtInt16
           : sizeof(U) == 4 ? kExtInt32
           : sizeof(U) == 8 ? kExtInt64
                            : 0;
  } else {
    return sizeof(U) == 2   ? kExtUint16
           : sizeof(U) == 4 ? kExtUint32
           : sizeof(U) == 8 ? kExtUint64
                            : 0;
  }
}
template <typename T>
inline constexpr bool kIsContiguous = ContiguousExtType<T>() != 0;

// ---- Large values: fresh memory at memory speed (docs/objects.md "Speed"). ----

// From this size on, a value handed to user code in new memory gets that memory prepared
// first (PrepareFreshMemory).
inline constexpr size_t kFreshValueBytes = size_t{2} << 20;
// From this size on, CopyBytes splits a copy across threads (as Ray's parallel memcpy).
inline constexpr size_t kParallelCopyBytes = size_t{8} << 20;

// memcpy(dst, src, n), on several threads (at most one per core) from kParallelCopyBytes on.
void CopyBytes(void* dst, const void* src, size_t n);

// Makes [p, p + n), allocated but not yet written, present before a copy into it: advises
// transparent huge pages on its 2 MiB-aligned interior (a host whose THP mode is "madvise"
// then faults 2 MiB at a time) and touches it from several threads. No-op below
// kFreshValueBytes. The bytes are left zero or unspecified: the caller overwrites them.
void PrepareFreshMemory(void* p, size_t n);

// Copies `n` bytes from `src` into `room`, memory just allocated and never written (a new
// vector's room past its size): advises huge pages on it, then copies on several threads,
// so that each page is faulted in by the copy that fills it (one pass over the memory, not
// a touch, a zero-fill and a copy). Returns false, having written nothing, where a vector's
// room may not be written before it holds elements (under AddressSanitizer, whose
// container annotations may poison it).
bool CopyIntoRoom(void* room, const void* src, size_t n);

// The rooms of large values, taken back for the next ones once let go (core/internal/
// kept_memory.h). NoteLanding names a room a large value lives in: a new vector it landed in,
// or (result) a vector user code made and returned, let go once packed. ReclaimLandings, for
// each room noted since its last call, takes it back and holds it (parks it) where it is free
// again (a block of its size allocated now holds it), and leaves it alone otherwise (the
// value is still kept): a worker calls it after each call, its arguments let go, and a
// process at each Remote() and Get. MakeRoomForLanding, right before a large value's new
// vector is allocated, frees every parked room for it to take; MakeRoomForUserCode, right
// before a call's user code runs, frees those of results (noted again, to be parked again
// at the call's end if the code left them free).
void NoteLanding(const void* room, size_t bytes, bool result = false);
void ReclaimLandings() noexcept;
void MakeRoomForLanding();
void MakeRoomForUserCode();

template <typename V>
struct IsStdVector : std::false_type {};
template <typename T, typename A>
struct IsStdVector<std::vector<T, A>> : std::true_type {};

// Notes the room of `v`, a large vector result about to be let go.
template <typename V>
void NoteRoomLetGo(const V& v) {
  if constexpr (IsStdVector<V>::value) {
    using T = typename V::value_type;
    if constexpr (std::is_trivially_copyable_v<T> &&
                  std::is_same_v<typename V::allocator_type, std::allocator<T>>) {
      size_t bytes = v.capacity() * sizeof(T);
      if (bytes >= kFreshValueBytes) NoteLanding(v.data(), bytes, /*result=*/true);
    }
  }
}

// Lets go of `v`, a call's result once packed: a large vector's memory is freed now and its
// room taken back at once, before another thread's allocation can carve it.
template <typename V>
void LetResultGo(V& v) {
  if constexpr (IsStdVector<V>::value && !std::is_const_v<V>) {
    NoteRoomLetGo(v);
    V(v.get_allocator()).swap(v);
    ReclaimLandings();
  }
}

// Gives `v` room for `n` elements in memory prepared by PrepareFreshMemory when the value is
// large and `v` has no room yet (a new vector); otherwise leaves it to the vector.
template <typename V>
void ReserveFresh(V& v, size_t n) {
  using T = typename V::value_type;
  if (n * sizeof(T) < kFreshValueBytes || v.capacity() >= n) return;
  V fresh(v.get_allocator());  // equal allocators: the swap below is defined for any
  MakeRoomForLanding();
  fresh.reserve(n);
  PrepareFreshMemory(fresh.data(), n * sizeof(T));
  v.swap(fresh);
}

// Makes `v` (a vector of a trivially copyable type) the `n` elements whose bytes are at
// `src` (which may be unaligned) in one pass over new memory, when the value is large and `v`
// has no room for it yet; returns false, leaving `v` as it was, otherwise. The bytes are
// copied into the new vector's room (CopyIntoRoom), then inserted from there onto
// themselves: a copy whose source is its destination, which the C library's memmove skips
// (and which would cost one pass over warm memory where it did not).
template <typename V>
bool AssignFresh(V& v, const void* src, size_t n) {
  using T = typename V::value_type;
  static_assert(std::is_trivially_copyable_v<T>);
  if (n * sizeof(T) < kFreshValueBytes || v.capacity() >= n) return false;
  V fresh(v.get_allocator());
  MakeRoomForLanding();
  fresh.reserve(n);
  if (!CopyIntoRoom(fresh.data(), src, n * sizeof(T))) return false;
  fresh.insert(fresh.end(), fresh.data(), fresh.data() + n);
  v.swap(fresh);
  return true;
}

// The elements are the machine's bytes, so the wire order is the machine's order.
static_assert(std::endian::native == std::endian::little,
              "contiguous vectors travel little-endian: a big-endian build must swap bytes");

template <typename T, typename Stream>
void PackContiguous(msgpack::packer<Stream>& pk, const T* data, size_t count) {
  uint32_t bytes = msgpack::checked_get_container_size(count * sizeof(T));
  pk.pack_ext(bytes, ContiguousExtType<T>());
  pk.pack_ext_body(reinterpret_cast<const char*>(data), bytes);
}

// The number of elements of kind `to` that `ext` (a contiguous vector of any kind) holds.
// Throws ConvertError if it is no contiguous vector, its length is not a whole number of
// its elements, or its elements do not convert to `to` (floating point to integer).
size_t ContiguousElementCount(const msgpack::object_ext& ext, int8_t to);
// Converts the `count` elements of `ext` (of another kind than `to`) one by one into the
// bytes of `count` elements of kind `to` at `out`; an integer out of `to`'s range throws
// ConvertError.
void ConvertContiguousElements(const msgpack::object_ext& ext, int8_t to, void* out, size_t count);

template <typename T, typename Alloc>
void ConvertContiguous(const msgpack::object_ext& ext, std::vector<T, Alloc>& v) {
  constexpr int8_t kind = ContiguousExtType<T>();
  size_t count = ContiguousElementCount(ext, kind);
  if (ext.type() == kind && AssignFresh(v, ext.data(), count)) return;
  ReserveFresh(v, count);
  v.resize(count);
  if (count == 0) return;
  if (ext.type() == kind) {
    CopyBytes(v.data(), ext.data(), count * sizeof(T));  // the input may be unaligned
  } else {
    ConvertContiguousElements(ext, kind, v.data(), count);
  }
}

}  // namespace orrery::internal

namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {

  // Packs a contiguous vector as one ext: one copy of the elements, whatever their number.
  template <typename T, typename Alloc>
  struct pack<std::vector<T, Alloc>, std::enable_if_t<orrery::internal::kIsContiguous<T>>> {
    template <typename Stream>
    packer<Stream>& operator()(packer<Stream>& pk, const std::vector<T, Alloc>& v) const {
      orrery::internal::PackContiguous(pk, v.data(), v.size());
      return pk;
    }
  };

  // Reads the ext of any numeric kind, or the array form (values written before the ext).
  template <typename T, typename Alloc>
  struct convert<std::vector<T, Alloc>, std::enable_if_t<orrery::internal::kIsContiguous<T>>> {
    const msgpack::object& operator()(const msgpack::object& o, std::vector<T, Alloc>& v) const {
      if (o.type == msgpack::type::EXT) {
        orrery::internal::ConvertContiguous(o.via.ext, v);
      } else {
        msgpack::v1::adaptor::convert<std::vector<T, Alloc>>()(o, v);
      }
      return o;
    }
  };

  // msgpack-c packs a float or double that holds an integer as that integer, and to find out
  // converts it to uint64_t: for exactly 2^64 that conversion is undefined behaviour (a
  // peer's arguments can produce such a result). That one value is written by hand, as a
  // float32 (0xca) or float64 (0xcb) with its bits big-endian.
  template <typename F>
  struct PackFloatingPoint {
    template <typename Stream>
    msgpack::packer<Stream>& operator()(msgpack::packer<Stream>& o, F d) const {
      if (d != F(18446744073709551616.0)) {
        if constexpr (sizeof(F) == 8) return o.pack_double(d);
        return o.pack_float(d);
      }
      using Bits = std::conditional_t<sizeof(F) == 8, uint64_t, uint32_t>;
      Bits bits = 0;
      std::memcpy(&bits, &d, sizeof(bits));
      char buf[1 + sizeof(Bits)];
      buf[0] = char(sizeof(F) == 8 ? 0xcb : 0xca);
      for (size_t i = 0; i < sizeof(Bits); ++i)
        buf[1 + i] = char(bits >> (8 * (sizeof(Bits) - 1 - i)));
      o.pack_bin_body(buf, sizeof(buf));  // raw bytes, no header of its own
      return o;
    }
  };
  template <>
  struct pack<double> : PackFloatingPoint<double> {};
  template <>
  struct pack<float> : PackFloatingPoint<float> {};

  // Bytes: one pass (allocate and copy) instead of msgpack's resize, which zero-fills first;
  // a large value goes into new memory on several threads (AssignFresh).
  template <typename Alloc>
  struct convert<std::vector<unsigned char, Alloc>, void> {
    const msgpack::object& operator()(const msgpack::object& o,
                                      std::vector<unsigned char, Alloc>& v) const {
      const char* p = nullptr;
      size_t n = 0;
      if (o.type == msgpack::type::BIN) {
        p = o.via.bin.ptr;
        n = o.via.bin.size;
      } else if (o.type == msgpack::type::STR) {
        p = o.via.str.ptr;
        n = o.via.str.size;
      } else {
        throw msgpack::type_error();
      }
      const auto* bytes = reinterpret_cast<const unsigned char*>(p);
      if (!orrery::internal::AssignFresh(v, bytes, n)) v.assign(bytes, bytes + n);
      return o;
    }
  };

  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
}  // namespace msgpack

namespace orrery::internal {

// A msgpack write target that appends to a std::string.
struct StringWriter {
  std::string& out;
  void write(const char* data, size_t size) { out.append(data, size); }
};

// A msgpack write target that only counts: packing into it costs O(1) per bin, str or
// contiguous vector.
struct CountingWriter {
  size_t size = 0;
  void write(const char*, size_t n) { size += n; }
};

// Throws std::length_error: a value packed into `size` bytes needed more (`over`) or fewer.
[[noreturn]] void ThrowPackedSizeMismatch(size_t size, bool over);

// A msgpack write target over a fixed span; writing past its end throws std::length_error.
struct SpanWriter {
  char* out;
  size_t left;
  size_t size;
  void write(const char* data, size_t n) {
    if (n > left) ThrowPackedSizeMismatch(size, true);
    CopyBytes(out, data, n);
    out += n;
    left -= n;
  }
};

template <typename T>
std::string Pack(const T& value) {
  std::string out;
  StringWriter w{out};
  msgpack::pack(w, value);
  return out;
}

inline std::string PackNil() { return std::string(1, '\xc0'); }

// The number of bytes Pack(value) produces, without producing them. Packing an ObjectRef
// shares it (as Pack does), so count values that hold refs only when they will be packed.
template <typename T>
size_t PackedSize(const T& value) {
  CountingWriter w;
  msgpack::pack(w, value);
  return w.size;
}

// Packs `value` into out[0, size) where size == PackedSize(value) (one copy of the
// payload). Throws std::length_error, with nothing written past out + size, if the value
// packs to another size.
template <typename T>
void PackInto(const T& value, char* out, size_t size) {
  SpanWriter w{out, size, size};
  msgpack::pack(w, value);
  if (w.left != 0) ThrowPackedSizeMismatch(size, false);
}

// Unpacks [data, data + size) as T; throws ConvertError with a readable message on a type
// mismatch or malformed input. A Buffer inside T shares the input only within a
// ScopedUnpackKeeper holding it (orrery/buffer.h); otherwise it copies.
template <typename T>
T Unpack(const char* data, size_t size, const char* what) {
  try {
    msgpack::object_handle oh = UnpackUntrusted(data, size, kValueUnpackLimits);
    return oh.get().as<T>();
  } catch (const ConvertError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConvertError(std::string(what) + ": cannot convert the value (" + e.what() + ")");
  }
}

template <typename T>
T Unpack(const std::string& bytes, const char* what) {
  return Unpack<T>(bytes.data(), bytes.size(), what);
}

// The contiguous payload inside packed bytes, for zero-copy views: when [data, data + size)
// is exactly one packed bin, str, or contiguous vector, the [pointer, length) of its payload
// (the raw elements, for a vector); nullopt otherwise (another type, or truncated or
// trailing bytes). Reads only the header.
std::optional<std::pair<const char*, size_t>> ContiguousPayload(const char* data, size_t size);

}  // namespace orrery::internal
