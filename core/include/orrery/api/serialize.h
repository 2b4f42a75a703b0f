// Argument and result serialization with msgpack-c. Built-in types and STL containers work
// out of the box; user types add MSGPACK_DEFINE(field, ...).
#pragma once

#ifndef MSGPACK_NO_BOOST
#define MSGPACK_NO_BOOST
#endif
#include <msgpack.hpp>

#include <string>
#include <utility>

namespace orrery::internal {

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
    msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
    return oh.get().as<T>();
  } catch (const ConvertError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConvertError(std::string(what) + ": cannot convert the value (" + e.what() + ")");
  }
}

}  // namespace orrery::internal
