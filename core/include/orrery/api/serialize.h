// Argument and result serialization with msgpack-c. Built-in types and STL containers work
// out of the box; user types add MSGPACK_DEFINE(field, ...).
#pragma once

#ifndef MSGPACK_NO_BOOST
#define MSGPACK_NO_BOOST
#endif
#include <cstddef>
#include <msgpack.hpp>
#include <string>
#include <utility>

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
// turns that into its own error.
msgpack::object_handle UnpackUntrusted(const char* data, size_t size, const UnpackLimits& limits);

// A msgpack write target that appends to a std::string.
struct StringWriter {
  std::string& out;
  void write(const char* data, size_t size) { out.append(data, size); }
};

template <typename T>
std::string Pack(const T& value) {
  std::string out;
  StringWriter w{out};
  msgpack::pack(w, value);
  return out;
}

inline std::string PackNil() { return std::string(1, '\xc0'); }

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

// Unpacks `bytes` as T; throws ConvertError with a readable message on a type mismatch.
template <typename T>
T Unpack(const std::string& bytes, const char* what) {
  try {
    msgpack::object_handle oh = UnpackUntrusted(bytes.data(), bytes.size(), kValueUnpackLimits);
    return oh.get().as<T>();
  } catch (const ConvertError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConvertError(std::string(what) + ": cannot convert the value (" + e.what() + ")");
  }
}

}  // namespace orrery::internal
