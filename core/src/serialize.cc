#include "orrery/api/serialize.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace orrery::internal {

const char* MsgpackTypeName(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL:
      return "nil";
    case msgpack::type::BOOLEAN:
      return "boolean";
    case msgpack::type::POSITIVE_INTEGER:
      return "positive integer";
    case msgpack::type::NEGATIVE_INTEGER:
      return "negative integer";
    case msgpack::type::FLOAT32:
      return "float";
    case msgpack::type::FLOAT64:
      return "double";
    case msgpack::type::STR:
      return "string";
    case msgpack::type::BIN:
      return "binary";
    case msgpack::type::ARRAY:
      return "array";
    case msgpack::type::MAP:
      return "map";
    case msgpack::type::EXT:
      return "ext";
  }
  return "unknown";
}

namespace {

// Walks the bytes without building anything, counting values and nesting, and stops at
// the first limit reached: the check that unpack_limit cannot make (a total).
class LimitVisitor : public msgpack::v2::null_visitor {
 public:
  explicit LimitVisitor(const UnpackLimits& limits) : limits_(limits) {}
  bool visit_nil() { return Count(); }
  bool visit_boolean(bool) { return Count(); }
  bool visit_positive_integer(uint64_t) { return Count(); }
  bool visit_negative_integer(int64_t) { return Count(); }
  bool visit_float32(float) { return Count(); }
  bool visit_float64(double) { return Count(); }
  bool visit_str(const char*, uint32_t) { return Count(); }
  bool visit_bin(const char*, uint32_t) { return Count(); }
  bool visit_ext(const char*, uint32_t) { return Count(); }
  bool start_array(uint32_t n) { return Open(n); }
  bool end_array() { return Close(); }
  bool start_map(uint32_t n) { return Open(n); }
  bool end_map() { return Close(); }
  void parse_error(size_t, size_t) { error_ = "malformed msgpack"; }
  void insufficient_bytes(size_t, size_t) { error_ = "truncated msgpack"; }

  const std::string& error() const { return error_; }

 private:
  bool Count() {
    if (++objects_ <= limits_.max_objects) return true;
    error_ = "more than " + std::to_string(limits_.max_objects) + " values";
    return false;
  }
  bool Open(uint32_t n) {
    if (n > limits_.max_container) {
      error_ = "a container of " + std::to_string(n) + " entries (the limit is " +
               std::to_string(limits_.max_container) + ")";
      return false;
    }
    if (++depth_ > limits_.max_depth) {
      error_ = "nesting deeper than " + std::to_string(limits_.max_depth);
      return false;
    }
    return Count();
  }
  bool Close() {
    --depth_;
    return true;
  }

  UnpackLimits limits_;
  size_t objects_ = 0;
  size_t depth_ = 0;
  std::string error_;
};

}  // namespace

msgpack::object_handle UnpackUntrusted(const char* data, size_t size, const UnpackLimits& limits) {
  if (limits.max_objects != 0 && limits.max_objects < size) {
    // The input could encode more values than allowed: count them first, allocating nothing.
    LimitVisitor visitor(limits);
    size_t off = 0;
    if (!msgpack::v2::parse(data, size, off, visitor)) {
      throw msgpack::unpack_error(visitor.error().empty() ? "malformed msgpack" : visitor.error());
    }
  }
  // An element takes at least one byte and a map pair two: a header claiming more than the
  // bytes left is a lie, refused before msgpack allocates for it.
  msgpack::unpack_limit limit(std::min(limits.max_container, size),
                              std::min(limits.max_container, size / 2), size, size, size,
                              limits.max_depth);
  // str, bin and ext point into the input instead of being copied into the zone: a Buffer
  // can then share them (ScopedUnpackKeeper), and a contiguous vector is copied once.
  auto reference = [](msgpack::type::object_type, size_t, void*) { return true; };
  return msgpack::unpack(data, size, reference, nullptr, limit);
}

void ThrowPackedSizeMismatch(size_t size, bool over) {
  throw std::length_error("the value packs to " + std::string(over ? "more" : "fewer") +
                          " than the " + std::to_string(size) + " bytes given");
}

}  // namespace orrery::internal
